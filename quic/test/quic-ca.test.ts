/**
 * @mutp/quic with a CA-issued server certificate: a client given no certificate hashes validates
 * the chain the WebPKI way (system roots plus the extra roots it is given) and the URL's host;
 * a foreign CA, a certificate for another name, an expired one, and the system roots alone (the
 * test CA is not among them) are refused; a reloaded certificate serves new handshakes.
 */
import { QuicClient, QuicConnectError, QuicServer, type QuicSession } from '@mutp/quic';
import { TestCa, type TestCertificate } from '@mutp/quic/test-ca';

const DAY_MS = 86_400_000;

let ca: TestCa;
let otherCa: TestCa;
let leaf: TestCertificate;
const servers: QuicServer[] = [];
const sessions: QuicSession[] = [];

beforeAll(() => {
  ca = new TestCa('mutp test CA');
  otherCa = new TestCa('another test CA');
  leaf = ca.issue({ names: ['localhost', '127.0.0.1'] });
});

afterAll(() => {
  ca?.dispose();
  otherCa?.dispose();
});

afterEach(async () => {
  for (const s of sessions.splice(0)) s.close();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(certificate: TestCertificate): Promise<QuicServer> {
  const server: QuicServer = await QuicServer.listen({
    host: '127.0.0.1',
    port: 0,
    certificatePem: certificate.certificatePem,
    privateKeyPem: certificate.privateKeyPem,
    maxSessions: 8,
    maxPendingSessions: 8,
    idleTimeoutMs: 10_000,
    onSessionRequest: (r) => server.acceptSession(r.sessionId),
    onDatagram: () => undefined,
  });
  servers.push(server);
  return server;
}

/** 'admitted', or the QuicConnectError code the connect failed with. */
async function outcome(url: string, extraRootCertificatesPem?: string): Promise<string> {
  try {
    const session = await QuicClient.connect({
      url,
      ...(extraRootCertificatesPem !== undefined ? { extraRootCertificatesPem } : {}),
      connectTimeoutMs: 5000,
      onDatagram: () => undefined,
    });
    sessions.push(session);
    return 'admitted';
  } catch (e) {
    if (e instanceof QuicConnectError) return e.code;
    throw e;
  }
}

test('a certificate chaining to a trusted root and naming the host is accepted, by IP address and by name', async () => {
  const server = await serve(leaf);
  expect(await outcome(`https://127.0.0.1:${server.port}/mutp`, ca.certificatePem)).toBe('admitted');
  expect(await outcome(`https://localhost:${server.port}/mutp`, ca.certificatePem)).toBe('admitted');
});

test("a chain file (leaf, then its issuer: fullchain.pem's form) is served and accepted", async () => {
  const server = await serve({
    certificatePem: leaf.certificatePem + ca.certificatePem,
    privateKeyPem: leaf.privateKeyPem,
  });
  expect(await outcome(`https://127.0.0.1:${server.port}/mutp`, ca.certificatePem)).toBe('admitted');
});

test('refused: the system roots alone, a foreign CA, another host name, an expired leaf, a leaf not yet valid', async () => {
  const server = await serve(leaf);
  const url = `https://127.0.0.1:${server.port}/mutp`;
  expect(await outcome(url)).toBe('certificate');
  expect(await outcome(url, otherCa.certificatePem)).toBe('certificate');

  const elsewhere = await serve(ca.issue({ names: ['proxy.example', '10.9.8.7'] }));
  expect(await outcome(`https://127.0.0.1:${elsewhere.port}/mutp`, ca.certificatePem)).toBe('certificate');

  const now = Date.now();
  const expired = await serve(ca.issue({ names: ['127.0.0.1'], notBefore: now - 3 * DAY_MS, notAfter: now - DAY_MS }));
  expect(await outcome(`https://127.0.0.1:${expired.port}/mutp`, ca.certificatePem)).toBe('certificate');

  const early = await serve(ca.issue({ names: ['127.0.0.1'], notBefore: now + DAY_MS, notAfter: now + 3 * DAY_MS }));
  expect(await outcome(`https://127.0.0.1:${early.port}/mutp`, ca.certificatePem)).toBe('certificate');
});

test("a reload switches the certificate new handshakes get (another CA's): old trust refused, new accepted", async () => {
  const server = await serve(leaf);
  const url = `https://127.0.0.1:${server.port}/mutp`;
  expect(await outcome(url, otherCa.certificatePem)).toBe('certificate');
  const renewed = otherCa.issue({ names: ['127.0.0.1'] });
  server.reloadCertificate(renewed.certificatePem, renewed.privateKeyPem);
  expect(await outcome(url, otherCa.certificatePem)).toBe('admitted');
  expect(await outcome(url, ca.certificatePem)).toBe('certificate');
});

test('bad client options: unusable extra roots; extra roots together with hashes', async () => {
  const server = await serve(leaf);
  const url = `https://127.0.0.1:${server.port}/mutp`;
  expect(await outcome(url, 'not a PEM')).toBe('url');
  await expect(
    QuicClient.connect({
      url,
      serverCertificateHashes: [new Uint8Array(32)],
      extraRootCertificatesPem: ca.certificatePem,
      onDatagram: () => undefined,
    }),
  ).rejects.toThrow(/extraRootCertificatesPem/);
});
