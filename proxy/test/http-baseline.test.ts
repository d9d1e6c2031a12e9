/** The Parallel HTTP baseline, /healthz and /metrics of an in-process proxy (no origo). */
import { createHash } from 'node:crypto';
import { IncomingMessage, request, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  decode,
  decodeAssertionKey,
  MessageType,
  MetaMessage,
  signHttpAnswer,
  verifyMeta,
} from '@mutp/shared/internal';
import { AssertionKey } from '../src/assertion-key';
import { createHttpServer, HttpServerDeps, monitoringAllowed } from '../src/http-server';
import { createProxy, Proxy } from '../src/proxy';
import { sha256 } from '../src/cache-entry';
import { generateKeyPairSync } from 'node:crypto';
import { LOOPBACK_ONLY, makeObject, objectOrigin, silentLogger, TestServer, testConfig, testTokens } from './helpers';

const OBJECT = makeObject(700_000, 9);
let origin: TestServer;
let proxy: Proxy;
let base: string;
let tokens: Awaited<ReturnType<typeof testTokens>>;
let token: string;

beforeAll(async () => {
  tokens = await testTokens();
  token = await tokens.sign('c-test');
  origin = await objectOrigin({ '/seg1.m4s': OBJECT, '/empty': new Uint8Array(0) }, 'video/iso.segment');
  proxy = createProxy(testConfig(), {
    logger: silentLogger(),
    allowedClasses: LOOPBACK_ONLY,
    tokens: tokens.verifier,
  });
  base = (await proxy.start()).httpUrl;
});

afterAll(async () => {
  await proxy.close();
  await origin.close();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** GET with node:http (and headers the proxy must not forward). */
function get(url: string, bearer: string | null = token, extra: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = {
      cookie: 'session=secret',
      ...(bearer !== null ? { authorization: `Bearer ${bearer}` } : {}),
      ...extra,
    };
    const req = request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const via = (target: string) => `${base}/v1/http?url=${encodeURIComponent(target)}`;

test('streams the object byte-exact with Content-Length, Content-Type and digest', async () => {
  const hitsBefore = origin.hits;
  const a = await get(via(`${origin.url}/seg1.m4s`));
  expect(a.status).toBe(200);
  expect(a.body.equals(Buffer.from(OBJECT))).toBe(true);
  expect(a.headers['content-length']).toBe(String(OBJECT.length));
  expect(a.headers['content-type']).toBe('video/iso.segment');
  expect(a.headers['x-mutp-sha256']).toBe(createHash('sha256').update(OBJECT).digest('hex'));
  // Second request: from the cache.
  const b = await get(via(`${origin.url}/seg1.m4s`));
  expect(b.body.equals(Buffer.from(OBJECT))).toBe(true);
  expect(origin.hits).toBe(hitsBefore + 1);
  const empty = await get(via(`${origin.url}/empty`));
  expect(empty.status).toBe(200);
  expect(empty.body.length).toBe(0);
  expect(empty.headers['content-length']).toBe('0');
});

describe('with an assertion key every answer carries a META the key signed (issue 31)', () => {
  const key = new AssertionKey();
  const publicKey = decodeAssertionKey(key.publicKey)!;
  let signing: Server;
  let signingBase: string;

  beforeAll(async () => {
    // The proxy's own services behind a second endpoint whose answers are signed (as proxy.ts
    // wires it when origo publishes the key).
    signing = createHttpServer({
      ...proxy.services,
      tokens: tokens.verifier,
      corsOrigins: [],
      maxPerAddress: 8,
      health: () => ({}),
      readiness: () => ({ ready: true }),
      signAnswer: (answer, req) =>
        signHttpAnswer(
          answer,
          req,
          key.signer(() => 'p-signing'),
          sha256,
        ),
    });
    await new Promise<void>((resolve) => signing.listen(0, '127.0.0.1', resolve));
    signingBase = `http://127.0.0.1:${(signing.address() as AddressInfo).port}`;
  });

  afterAll(() => new Promise((resolve) => signing.close(resolve)));

  const metaOf = (a: Answer): MetaMessage => {
    const decoded = decode(Buffer.from(String(a.headers['x-mutp-meta']), 'base64'));
    if (!decoded.ok || decoded.value.type !== MessageType.Meta) throw new Error('x-mutp-meta is not a META');
    return decoded.value;
  };

  test('whole object and a range: the signature covers URL, range, digest, length and attributes', async () => {
    const url = `${origin.url}/seg1.m4s`;
    const whole = await get(`${signingBase}/v1/http?url=${encodeURIComponent(url)}`, token, {
      origin: 'chrome-extension://abcdefghijklmnop',
    });
    expect(whole.status).toBe(200);
    expect(String(whole.headers['access-control-expose-headers'])).toContain('x-mutp-meta');
    const meta = metaOf(whole);
    expect(verifyMeta(meta, { url }, 'p-signing', publicKey)).toBe(true);
    expect(Buffer.from(meta.digest).equals(sha256(whole.body))).toBe(true);
    expect([meta.objectLength, meta.attributes]).toEqual([OBJECT.length, { contentType: 'video/iso.segment' }]);
    // The statement is about this request and this proxy: not reusable for another.
    expect(verifyMeta(meta, { url: `${url}?v=2` }, 'p-signing', publicKey)).toBe(false);
    expect(verifyMeta(meta, { url, range: { start: 0, length: 10 } }, 'p-signing', publicKey)).toBe(false);
    expect(verifyMeta(meta, { url }, 'p-other', publicKey)).toBe(false);

    const range = { start: 1000, length: 5000 };
    const part = await get(`${signingBase}/v1/http?url=${encodeURIComponent(url)}&start=1000&length=5000`);
    expect(part.body.equals(Buffer.from(OBJECT.subarray(1000, 6000)))).toBe(true);
    const partMeta = metaOf(part);
    expect(verifyMeta(partMeta, { url, range }, 'p-signing', publicKey)).toBe(true);
    expect(Buffer.from(partMeta.digest).equals(sha256(part.body))).toBe(true);
    expect(partMeta.attributes?.range?.start).toBe(1000);
    expect(partMeta.signed?.fetchedAt).toBeGreaterThan(0);
  });

  test('a proxy without a key states the digest only', async () => {
    const a = await get(via(`${origin.url}/seg1.m4s`));
    expect([a.status, a.headers['x-mutp-meta']]).toEqual([200, undefined]);
  });
});

test('/v1/http requires a valid, unexpired token signed by origo', async () => {
  const target = via(`${origin.url}/seg1.m4s`);
  const foreign = generateKeyPairSync('ed25519').privateKey;
  for (const bearer of [null, 'x', await tokens.sign('c-old', -60), await tokens.sign('c-evil', 300, foreign)]) {
    const a = await get(target, bearer);
    expect([bearer, a.status]).toEqual([bearer, 401]);
    expect(JSON.parse(a.body.toString())).toMatchObject({ error: 'unauthorized' });
  }
});

test('CORS only for extensions: a web page origin gets no ACAO, nor a preflight', async () => {
  const target = via(`${origin.url}/seg1.m4s`);
  const page = await get(target, token, { origin: 'https://evil.example' });
  expect(page.headers['access-control-allow-origin']).toBeUndefined();
  const ext = await get(target, token, { origin: 'chrome-extension://abcdefghijklmnop' });
  expect(ext.headers['access-control-allow-origin']).toBe('chrome-extension://abcdefghijklmnop');
  expect(ext.headers['x-content-type-options']).toBe('nosniff');
});

test('origin ports other than 80/443 are refused by default, nothing fetched', async () => {
  const strict = createProxy(testConfig({ originPorts: [80, 443] }), {
    logger: silentLogger(),
    allowedClasses: LOOPBACK_ONLY,
    tokens: tokens.verifier,
  });
  try {
    const url = (await strict.start()).httpUrl;
    const hits = origin.hits;
    const a = await get(`${url}/v1/http?url=${encodeURIComponent(`${origin.url}/seg1.m4s`)}`);
    expect(a.status).toBe(403);
    expect(JSON.parse(a.body.toString())).toEqual({
      error: 'refused',
      message: 'this URL is not served by this proxy',
    });
    expect(origin.hits).toBe(hits);
  } finally {
    await strict.close();
  }
});

test('origin 404 maps to 404 with a JSON error body', async () => {
  const a = await get(via(`${origin.url}/nope.m4s`));
  expect(a.status).toBe(404);
  expect(a.headers['content-type']).toMatch(/application\/json/);
  expect(JSON.parse(a.body.toString())).toMatchObject({ error: 'not-found' });
});

test('SSRF: private and link-local targets and other schemes are refused with 403, nothing fetched', async () => {
  for (const target of ['http://169.254.169.254/latest/meta-data/', 'http://[fd00::1]/', 'file:///etc/passwd']) {
    const a = await get(via(target));
    expect([target, a.status]).toEqual([target, 403]);
    expect(JSON.parse(a.body.toString())).toMatchObject({ error: 'refused' });
  }
  const missing = await get(`${base}/v1/http`);
  expect(missing.status).toBe(400);
});

test('a proxy without allowPrivateOrigins refuses its own loopback origin', async () => {
  const strict = createProxy(testConfig(), { logger: silentLogger(), tokens: tokens.verifier });
  try {
    const url = (await strict.start()).httpUrl;
    const hits = origin.hits;
    const a = await get(`${url}/v1/http?url=${encodeURIComponent(`${origin.url}/seg1.m4s`)}`);
    expect(a.status).toBe(403);
    // A fixed text: the refusal does not say what the address is (no scanning through the proxy).
    expect(JSON.parse(a.body.toString())).toMatchObject({ error: 'refused' });
    expect(origin.hits).toBe(hits);
  } finally {
    await strict.close();
  }
});

test('too large objects map to 413', async () => {
  const small = createProxy(testConfig({ maxObjectBytes: 1000 }), {
    logger: silentLogger(),
    allowedClasses: LOOPBACK_ONLY,
    tokens: tokens.verifier,
  });
  try {
    const url = (await small.start()).httpUrl;
    const a = await get(`${url}/v1/http?url=${encodeURIComponent(`${origin.url}/seg1.m4s`)}`);
    expect(a.status).toBe(413);
    expect(JSON.parse(a.body.toString())).toMatchObject({ error: 'too-large' });
  } finally {
    await small.close();
  }
});

test('the upload limit shapes the HTTP body too', async () => {
  const shaped = createProxy(testConfig({ uploadLimitKBps: 4096 }), {
    logger: silentLogger(),
    allowedClasses: LOOPBACK_ONLY,
    tokens: tokens.verifier,
  });
  try {
    const url = (await shaped.start()).httpUrl;
    const a = await get(`${url}/v1/http?url=${encodeURIComponent(`${origin.url}/seg1.m4s`)}`);
    expect(a.body.equals(Buffer.from(OBJECT))).toBe(true);
    const bucket = shaped.stats().bucket;
    expect(bucket.bytesTaken).toBe(OBJECT.length);
    expect(bucket.waits).toBeGreaterThan(0);
  } finally {
    await shaped.close();
  }
});

test('/healthz and /metrics: a loopback peer without a token, anyone else only with the metrics token', async () => {
  const req = (remoteAddress: string, authorization?: string) =>
    ({ socket: { remoteAddress }, headers: authorization ? { authorization } : {} }) as unknown as IncomingMessage;
  const open = { metricsToken: undefined } as HttpServerDeps;
  expect(monitoringAllowed(open, req('127.0.0.1'))).toBe(true);
  expect(monitoringAllowed(open, req('::ffff:127.0.0.1'))).toBe(true);
  expect(monitoringAllowed(open, req('::1'))).toBe(true);
  expect(monitoringAllowed(open, req('203.0.113.5'))).toBe(false);
  // By the address as parsed, not its first characters (one helper with origo: isLoopbackHost).
  expect(monitoringAllowed(open, req('0:0:0:0:0:0:0:1'))).toBe(true);
  expect(monitoringAllowed(open, req('127.0.0.1.evil.example'))).toBe(false);
  expect(monitoringAllowed(open, req('::ffff:127.evil.example'))).toBe(false);
  expect(monitoringAllowed(open, req('203.0.113.5', 'Bearer anything'))).toBe(false);
  const withToken = { metricsToken: 'm0nitor' } as HttpServerDeps;
  expect(monitoringAllowed(withToken, req('203.0.113.5', 'Bearer m0nitor'))).toBe(true);
  expect(monitoringAllowed(withToken, req('127.0.0.1'))).toBe(false);
  expect(monitoringAllowed(withToken, req('203.0.113.5', 'Bearer m0nitors'))).toBe(false);
  // Over the wire: 401 with a challenge, 200 with the token.
  const guarded = createProxy(testConfig({ metricsToken: 'm0nitor' }), { logger: silentLogger() });
  try {
    const url = (await guarded.start()).httpUrl;
    const refused = await get(`${url}/metrics`, null);
    expect([refused.status, refused.headers['www-authenticate']]).toEqual([401, 'Bearer realm="mutp-metrics"']);
    expect((await get(`${url}/healthz`, 'm0nitor')).status).toBe(200);
    expect((await get(`${url}/livez`, null)).status).toBe(200);
  } finally {
    await guarded.close();
  }
});

test('/healthz and /metrics', async () => {
  const h = await get(`${base}/healthz`);
  expect(h.status).toBe(200);
  const health = JSON.parse(h.body.toString());
  expect(health).toMatchObject({ status: 'ok', name: 'test-proxy', maxTransfers: 64, capacityBps: 0 });
  expect(health.cache.hits).toBeGreaterThanOrEqual(1);
  const m = await get(`${base}/metrics`);
  expect(m.status).toBe(200);
  const text = m.body.toString();
  expect(text).toMatch(/mutp_proxy_transfers_total\{mode="http",outcome="done"\} \d+/);
  expect(text).toMatch(/mutp_proxy_bytes_sent_total\{kind="http"\} \d+/);
  expect(text).toMatch(/mutp_proxy_cache_lookups_total\{outcome="hit"\} \d+/);
  expect(text).toMatch(/mutp_proxy_origin_errors_total\{kind="not-found"\} 1/);
  expect(text).toMatch(/mutp_proxy_origin_errors_total\{kind="refused"\} \d+/);
  // Latency histograms, the origin's bytes, the build, and the process metrics under the prefix (issue 32).
  const count = (pattern: string) => Number(new RegExp(`^${pattern} (\\d+)$`, 'm').exec(text)?.[1] ?? -1);
  expect(count('mutp_proxy_transfer_duration_seconds_count\\{mode="http"\\}')).toBeGreaterThan(0);
  expect(count('mutp_proxy_transfer_first_byte_seconds_count\\{mode="http"\\}')).toBeGreaterThan(0);
  expect(count('mutp_proxy_origin_fetch_duration_seconds_count\\{outcome="ok"\\}')).toBeGreaterThan(0);
  expect(count('mutp_proxy_origin_fetch_duration_seconds_count\\{outcome="not-found"\\}')).toBe(1);
  expect(count('mutp_proxy_origin_bytes_total')).toBeGreaterThanOrEqual(OBJECT.byteLength);
  expect(text).toContain(`mutp_proxy_build_info{version="0.1.0",node="${process.version}"} 1`);
  expect(text).toContain('mutp_proxy_process_cpu_user_seconds_total');
  expect(text).toContain('mutp_proxy_nodejs_heap_size_used_bytes');
  expect((await get(`${base}/nothing`)).status).toBe(404);
});
