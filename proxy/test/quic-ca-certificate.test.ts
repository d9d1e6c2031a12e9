/**
 * An operator's CA-issued certificate for the QUIC endpoint (quic-ca-certificate.ts): the pair is
 * checked (key, validity, host name, chain order), served by the real endpoint, re-read when the
 * files change (a renewal switches what new handshakes get; a broken or half-written renewal keeps
 * the previous certificate), and the service then reports no hashes. A test CA made with openssl.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { QuicClient, QuicConnectError, QuicServer } from '@mutp/quic';
import { TestCa, type TestCertificate } from '@mutp/quic/test-ca';
import { CaCertificateFiles, checkCaCertificate } from '../src/quic-ca-certificate';
import { listenNative } from '../src/quic-native';
import { quicUrlHost, QuicService } from '../src/quic-service';
import type { PeerManager } from '../src/peer-manager';
import type { ClientTokenVerifier } from '../src/client-tokens';

const DAY_MS = 86_400_000;
const logger = pino({ level: 'silent' });

let ca: TestCa;
let renewalCa: TestCa;
let leaf: TestCertificate;
let dir: string;

beforeAll(() => {
  ca = new TestCa('operator CA');
  renewalCa = new TestCa('renewal CA');
  leaf = ca.issue({ names: ['proxy.example', '127.0.0.1'] });
});

afterAll(() => {
  ca?.dispose();
  renewalCa?.dispose();
});

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mutp-quic-ca-'));
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Replaces a file whole (as certbot's new files behind its symlinks, or an editor's save). */
function put(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
  return path;
}

describe('checkCaCertificate', () => {
  const now = Date.now();

  test('a leaf naming the host, with its key: its hash and validity', () => {
    const c = checkCaCertificate(leaf.certificatePem + ca.certificatePem, leaf.privateKeyPem, 'proxy.example', now);
    expect(c.sha256).toHaveLength(32);
    expect(c.notBefore).toBeLessThanOrEqual(now);
    expect(c.notAfter).toBeGreaterThan(now);
    expect(() => checkCaCertificate(leaf.certificatePem, leaf.privateKeyPem, '127.0.0.1', now)).not.toThrow();
  });

  test('refused with the reason: another key, another host, expired, not yet valid, chain out of order, no PEM', () => {
    const other = ca.issue({ names: ['proxy.example'] });
    expect(() => checkCaCertificate(leaf.certificatePem, other.privateKeyPem, 'proxy.example', now)).toThrow(
      /not the certificate's/,
    );
    expect(() => checkCaCertificate(leaf.certificatePem, 'junk', 'proxy.example', now)).toThrow(
      /no usable private key/,
    );
    expect(() => checkCaCertificate(leaf.certificatePem, leaf.privateKeyPem, 'other.example', now)).toThrow(
      /does not name other.example/,
    );
    expect(() => checkCaCertificate(leaf.certificatePem, leaf.privateKeyPem, '10.0.0.1', now)).toThrow(/does not name/);
    expect(() =>
      checkCaCertificate(leaf.certificatePem, leaf.privateKeyPem, 'proxy.example', now + 60 * DAY_MS),
    ).toThrow(/expired/);
    expect(() => checkCaCertificate(leaf.certificatePem, leaf.privateKeyPem, 'proxy.example', now - DAY_MS)).toThrow(
      /not valid before/,
    );
    expect(() =>
      checkCaCertificate(ca.certificatePem + leaf.certificatePem, leaf.privateKeyPem, 'proxy.example', now),
    ).toThrow();
    expect(() =>
      checkCaCertificate(leaf.certificatePem + renewalCa.certificatePem, leaf.privateKeyPem, 'proxy.example', now),
    ).toThrow(/not issued by/);
    expect(() => checkCaCertificate('garbage', leaf.privateKeyPem, 'proxy.example', now)).toThrow(/no PEM certificate/);
  });

  test('quicUrlHost: names, IPv4, IPv6 without brackets', () => {
    expect(quicUrlHost('https://proxy.example:4433/mutp')).toBe('proxy.example');
    expect(quicUrlHost('http://127.0.0.1:8800')).toBe('127.0.0.1');
    expect(quicUrlHost('https://[::1]:4433/mutp')).toBe('::1');
  });
});

describe('the endpoint serving the files, reloaded when they change', () => {
  let server: QuicServer;
  let files: CaCertificateFiles;
  const servers: QuicServer[] = [];

  afterEach(async () => {
    files?.stop();
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  async function start(): Promise<void> {
    const certificateFile = put('fullchain.pem', leaf.certificatePem + ca.certificatePem);
    const keyFile = put('privkey.pem', leaf.privateKeyPem);
    files = new CaCertificateFiles({
      files: { certificateFile, keyFile, checkIntervalMs: 60_000 },
      host: '127.0.0.1',
      now: () => Date.now(),
      onChange: (c) => server.reloadCertificate(c.certificatePem, c.privateKeyPem),
      logger,
    });
    server = await QuicServer.listen({
      host: '127.0.0.1',
      port: 0,
      certificatePem: files.certificate.certificatePem,
      privateKeyPem: files.certificate.privateKeyPem,
      maxSessions: 8,
      maxPendingSessions: 8,
      onSessionRequest: (r) => server.acceptSession(r.sessionId),
      onDatagram: () => undefined,
    });
    servers.push(server);
  }

  /** 'admitted' or the connect error's code, for a client trusting `root` only. */
  async function trusting(root: TestCa): Promise<string> {
    try {
      const s = await QuicClient.connect({
        url: `https://127.0.0.1:${server.port}/mutp`,
        extraRootCertificatesPem: root.certificatePem,
        connectTimeoutMs: 5000,
        onDatagram: () => undefined,
      });
      s.close();
      return 'admitted';
    } catch (e) {
      if (e instanceof QuicConnectError) return e.code;
      throw e;
    }
  }

  test('unchanged files are not re-read; a renewal is served to new handshakes', async () => {
    await start();
    expect(files.hashes()).toEqual([]);
    expect(await trusting(ca)).toBe('admitted');
    expect(await files.check()).toBe(false);

    const renewed = renewalCa.issue({ names: ['127.0.0.1'] });
    put('fullchain.pem', renewed.certificatePem + renewalCa.certificatePem);
    put('privkey.pem', renewed.privateKeyPem);
    expect(await files.check()).toBe(true);
    expect(await trusting(renewalCa)).toBe('admitted');
    expect(await trusting(ca)).toBe('certificate');
    expect(files.stats()).toMatchObject({ reloads: 1, reloadFailures: 0 });
  });

  test('a half-written renewal (new certificate, old key) keeps the old one; the key arriving completes it', async () => {
    await start();
    const renewed = renewalCa.issue({ names: ['127.0.0.1'] });
    put('fullchain.pem', renewed.certificatePem);
    expect(await files.check()).toBe(false);
    expect(files.stats()).toMatchObject({ reloads: 0, reloadFailures: 1 });
    expect(await trusting(ca)).toBe('admitted');

    put('privkey.pem', renewed.privateKeyPem);
    expect(await files.check()).toBe(true);
    expect(await trusting(renewalCa)).toBe('admitted');
  });

  test('a renewal for another host, an expired one, or a deleted file keeps the old certificate', async () => {
    await start();
    const now = Date.now();
    for (const bad of [
      renewalCa.issue({ names: ['elsewhere.example'] }),
      renewalCa.issue({ names: ['127.0.0.1'], notBefore: now - 3 * DAY_MS, notAfter: now - DAY_MS }),
    ]) {
      put('fullchain.pem', bad.certificatePem);
      put('privkey.pem', bad.privateKeyPem);
      expect(await files.check()).toBe(false);
    }
    rmSync(join(dir, 'privkey.pem'));
    expect(await files.check()).toBe(false);
    expect(files.stats()).toMatchObject({ reloads: 0, reloadFailures: 3 });
    expect(await trusting(ca)).toBe('admitted');
  });
});

describe('QuicService with CA certificate files', () => {
  function service(host: string): QuicService {
    return new QuicService({
      host: '127.0.0.1',
      port: 0,
      certificateDays: 14,
      generateCertificate: () => {
        throw new Error('no self-signed certificate is made when CA files are given');
      },
      caCertificate: {
        files: {
          certificateFile: put('fullchain.pem', leaf.certificatePem),
          keyFile: put('privkey.pem', leaf.privateKeyPem),
          checkIntervalMs: 60_000,
        },
        host,
      },
      maxRateBps: 0,
      // Only session requests reach these; none is made here.
      peers: undefined as unknown as PeerManager,
      tokens: undefined as unknown as ClientTokenVerifier,
      logger,
      listen: listenNative,
    });
  }

  test('registers its endpoint without hashes and reports none', async () => {
    const s = service('proxy.example');
    try {
      await s.start();
      expect(s.reportsHashes).toBe(false);
      expect(s.certificateHashes()).toEqual([]);
      const url = s.url('https://proxy.example:8800');
      expect(url).toMatch(/^https:\/\/proxy\.example:\d+\/mutp$/);
      expect(s.endpoint(url)).toEqual({ url });
      expect(s.stats().certificate).toMatchObject({ source: 'ca-files', reloads: 0 });
    } finally {
      await s.close();
    }
  });

  test('refuses to start with a certificate that does not name the QUIC URL host', async () => {
    const s = service('other.example');
    await expect(s.start()).rejects.toThrow(/does not name other.example/);
    await s.close();
  });
});
