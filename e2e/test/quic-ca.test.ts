/**
 * QUIC endpoints with an operator's CA-issued certificate, end to end: two proxies serve
 * certificate files from a test CA (--quic-cert-file/--quic-key-file), a third its self-signed
 * ones. origo offers the CA proxies' endpoints without hashes; a Node client that trusts the CA
 * (`createNodeHost`'s extra roots, `mutp --quic-ca-file`) downloads over QUIC from all three; one
 * that does not is refused by those two and takes WebRTC there, in the same download. Replacing a
 * proxy's files switches the certificate new handshakes get.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetResult, MutpClient, TransportPreference } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { QuicClient, QuicConnectError } from '@mutp/quic';
import { TestCa } from '@mutp/quic/test-ca';
import { createNodeHost } from '@mutp/client';
import { Cluster, startCluster } from '../src/cluster';
import { Origin, startOrigin, syntheticObject } from '../src/origin';

jest.setTimeout(120_000);

let codecs: Awaited<ReturnType<typeof loadNodeCodecs>>;
let origin: Origin;
let cluster: Cluster;
let ca: TestCa;
let renewalCa: TestCa;
let dir: string;

/** Writes a file whole (a rename, as certbot's renewals appear behind their symlinks). */
function put(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
  return path;
}

/** The certificate and key files of proxy `name`, from a leaf of `issuer` for the loopback host. */
function certify(name: string, issuer: TestCa): string[] {
  const leaf = issuer.issue({ names: ['127.0.0.1'] });
  return [
    '--quic-cert-file',
    put(`${name}-fullchain.pem`, leaf.certificatePem + issuer.certificatePem),
    '--quic-key-file',
    put(`${name}-privkey.pem`, leaf.privateKeyPem),
  ];
}

beforeAll(async () => {
  codecs = await loadNodeCodecs();
  origin = await startOrigin();
  ca = new TestCa('operator CA');
  renewalCa = new TestCa('renewal CA');
  dir = mkdtempSync(join(tmpdir(), 'mutp-e2e-quic-ca-'));
  cluster = await startCluster({
    proxies: [
      { name: 'ca1', uploadKBps: 0, extraArgs: [...certify('ca1', ca), '--quic-cert-check-ms', '200'] },
      { name: 'ca2', uploadKBps: 0, extraArgs: certify('ca2', ca) },
      { name: 'self', uploadKBps: 0 },
    ],
    allowPrivateOrigins: true,
    quic: true,
    // Three proxies start side by side; on a busy 2-core machine that takes longer than the default.
    readyTimeoutMs: 90_000,
  });
});

afterAll(async () => {
  await cluster?.stop();
  await origin?.close();
  releaseNodeRtc();
  ca?.dispose();
  renewalCa?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

function newClient(transport: TransportPreference, trustedRoots?: string): MutpClient {
  const host =
    trustedRoots === undefined ? createNodeHost() : createNodeHost({}, { extraRootCertificatesPem: trustedRoots });
  return new MutpClient(host, { origoUrl: cluster.clientUrl, codecs, transport, connectTimeoutMs: 2000 });
}

/** Each source's name and transport. */
function transportsByName(r: GetResult): Record<string, string | undefined> {
  return Object.fromEntries(r.sources.map((s) => [s.name, 'transport' in s ? s.transport : 'http']));
}

interface OfferedProxy {
  name: string;
  quic?: { url: string; certificateHashes?: string[] };
}

async function offeredProxies(): Promise<OfferedProxy[]> {
  const { OrigoSession, systemClock } = await import('@mutp/shared/client');
  const { default: WebSocket } = await import('ws');
  const session = new OrigoSession(
    cluster.clientUrl,
    (url) => new WebSocket(url) as unknown as import('@mutp/shared/client').WebSocketLike,
    systemClock,
    10_000,
  );
  try {
    await session.connect();
    return (await session.requestProxies(3, 'rlnc')) as OfferedProxy[];
  } finally {
    session.close();
  }
}

test('origo offers the CA-certified endpoints without hashes, the self-signed one with them', async () => {
  const offered = Object.fromEntries((await offeredProxies()).map((p) => [p.name, p.quic]));
  expect(offered.ca1?.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/mutp$/);
  expect(offered.ca1?.certificateHashes).toBeUndefined();
  expect(offered.ca2?.certificateHashes).toBeUndefined();
  expect(offered.self?.certificateHashes?.length).toBeGreaterThanOrEqual(1);
});

test('a client trusting the CA downloads over QUIC from all three, byte-exact', async () => {
  const client = newClient('quic', ca.certificatePem);
  try {
    const result = (await client.get(`${origin.url}/object/900000/5`, { mode: 'rlnc', proxies: 3 })) as GetResult;
    expect(sha(result.object)).toBe(sha(syntheticObject(900_000, 5)));
    expect(transportsByName(result)).toEqual({ ca1: 'quic', ca2: 'quic', self: 'quic' });
  } finally {
    client.close();
  }
});

test('a client not trusting the CA refuses those two and takes WebRTC there, in the same download', async () => {
  const client = newClient('auto', renewalCa.certificatePem);
  try {
    const result = (await client.get(`${origin.url}/object/700000/9`, { mode: 'fountain', proxies: 3 })) as GetResult;
    expect(sha(result.object)).toBe(sha(syntheticObject(700_000, 9)));
    expect(transportsByName(result)).toEqual({ ca1: 'webrtc', ca2: 'webrtc', self: 'quic' });
  } finally {
    client.close();
  }
});

test("replacing a proxy's files switches the certificate its new handshakes get", async () => {
  const url = (await offeredProxies()).find((p) => p.name === 'ca1')!.quic!.url;
  // No token: a handshake whose certificate is accepted ends 'refused' (no admission), one whose
  // certificate is not ends 'certificate'.
  const outcome = (roots: string) =>
    QuicClient.connect({
      url,
      extraRootCertificatesPem: roots,
      connectTimeoutMs: 5000,
      onDatagram: () => undefined,
    }).then(
      (s) => {
        s.close();
        return 'admitted';
      },
      (e: unknown) => (e instanceof QuicConnectError ? e.code : String(e)),
    );
  expect(await outcome(ca.certificatePem)).toBe('refused');
  expect(await outcome(renewalCa.certificatePem)).toBe('certificate');
  certify('ca1', renewalCa);
  const deadline = Date.now() + 10_000;
  while ((await outcome(renewalCa.certificatePem)) !== 'refused') {
    if (Date.now() > deadline) throw new Error('the proxy did not serve the renewed certificate within 10 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(await outcome(ca.certificatePem)).toBe('certificate');
});
