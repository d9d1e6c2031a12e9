/** Ranged requests of the Parallel HTTP baseline (`start`, `length`) on an in-process proxy. */
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { createProxy, Proxy } from '../src/proxy';
import { LOOPBACK_ONLY, makeObject, objectOrigin, silentLogger, TestServer, testConfig, testTokens } from './helpers';

const OBJECT = makeObject(300_000, 21);
let origin: TestServer;
let proxy: Proxy;
let base: string;
let token: string;

beforeAll(async () => {
  const tokens = await testTokens();
  token = await tokens.sign('c-range');
  origin = await objectOrigin({ '/movie.mp4': OBJECT });
  proxy = createProxy(testConfig(), { logger: silentLogger(), allowedClasses: LOOPBACK_ONLY, tokens: tokens.verifier });
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

function get(query: Record<string, string>): Promise<Answer> {
  const url = `${base}/v1/http?${new URLSearchParams(query).toString()}`;
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const target = () => `${origin.url}/movie.mp4`;

test('a range is answered with its bytes, where they sit and the complete length', async () => {
  const a = await get({ url: target(), start: '1000', length: '5000' });
  expect(a.status).toBe(200);
  expect(a.body.equals(Buffer.from(OBJECT.subarray(1000, 6000)))).toBe(true);
  expect(a.headers['content-length']).toBe('5000');
  expect(a.headers['x-mutp-range-start']).toBe('1000');
  expect(a.headers['x-mutp-complete-length']).toBe(String(OBJECT.length));
  expect(a.headers['x-mutp-sha256']).toBe(createHash('sha256').update(OBJECT.subarray(1000, 6000)).digest('hex'));
  expect(a.headers['content-type']).toBe('video/mp4');
  // The end of the resource: fewer bytes. Past it: 416. Neither goes to the origin again.
  const hits = origin.hits;
  const end = await get({ url: target(), start: String(OBJECT.length - 100), length: '5000' });
  expect(end.status).toBe(200);
  expect(end.body.equals(Buffer.from(OBJECT.subarray(OBJECT.length - 100)))).toBe(true);
  const past = await get({ url: target(), start: String(OBJECT.length), length: '10' });
  expect(past.status).toBe(416);
  expect(JSON.parse(past.body.toString())).toMatchObject({ error: 'range-not-satisfiable' });
  expect(origin.hits).toBe(hits);
  // Without a range: the whole object, no range headers.
  const whole = await get({ url: target() });
  expect(whole.body.equals(Buffer.from(OBJECT))).toBe(true);
  expect(whole.headers['x-mutp-range-start']).toBeUndefined();
});

test.each([
  [{ start: '10' }, /go together/],
  [{ length: '10' }, /go together/],
  [{ start: '-1', length: '10' }, /decimal/],
  [{ start: '0x10', length: '10' }, /decimal/],
  [{ start: '0', length: '0' }, /length 0/],
  [{ start: '0', length: String(2 ** 31) }, /range length/],
])('bad range %j is a 400 without any origin request', async (range, text) => {
  const hits = origin.hits;
  const a = await get({ url: target(), ...range });
  expect(a.status).toBe(400);
  expect(JSON.parse(a.body.toString()).message).toMatch(text);
  expect(origin.hits).toBe(hits);
});
