/**
 * Origin fetch and the SSRF guard against local node:http origins. Only loopback is ever
 * contacted: refusals of other addresses happen before any connection (a test resolver maps
 * invented host names to the addresses under test).
 */
import { AddressClass, checkUrl, classifyAddress, isAddressAllowed, LookupAll } from '@mutp/origin-fetch';
import { ServeError, ServeErrorKind } from '../src/errors';
import { fetchOrigin, OriginFetchOptions } from '@mutp/origin-fetch';
import { makeObject, startServer, TestServer } from './helpers';

const BODY = makeObject(100_000, 3);
let origin: TestServer;
let lastHeaders: Record<string, string | string[] | undefined> = {};

beforeAll(async () => {
  origin = await startServer((req, res) => {
    lastHeaders = req.headers;
    const path = req.url ?? '';
    if (path === '/ok') {
      res.writeHead(200, { 'content-type': 'video/mp2t', 'content-length': BODY.length }).end(BODY);
    } else if (path === '/chunked') {
      res.writeHead(200, { 'content-type': 'video/mp4' });
      res.write(BODY.subarray(0, 50_000));
      res.end(BODY.subarray(50_000));
    } else if (path === '/empty') {
      res.writeHead(200, { 'content-length': 0 }).end();
    } else if (path === '/gone') {
      res.writeHead(410).end();
    } else if (path === '/fail') {
      res.writeHead(500).end('boom');
    } else if (path === '/hang') {
      // never answers
    } else if (path === '/slow-body') {
      res.writeHead(200, { 'content-length': BODY.length });
      res.write(BODY.subarray(0, 1000)); // and then nothing
    } else if (path === '/short') {
      res.writeHead(200, { 'content-length': BODY.length });
      res.end(BODY.subarray(0, 1000)); // fewer bytes than announced
    } else if (path === '/big-declared') {
      res.writeHead(200, { 'content-length': 10_000_000 }).end();
    } else if (path === '/big-chunked') {
      res.writeHead(200);
      const chunk = new Uint8Array(64 * 1024);
      let sent = 0;
      const more = () => {
        while (sent < 4_000_000) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    } else if (path === '/gzip') {
      res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': 3 }).end('abc');
    } else if (path.startsWith('/redirect-to?')) {
      const target = decodeURIComponent(path.slice('/redirect-to?'.length));
      res.writeHead(302, { location: target }).end();
    } else if (path.startsWith('/loop/')) {
      const n = Number(path.slice('/loop/'.length));
      res.writeHead(301, { location: `/loop/${n + 1}` }).end();
    } else if (path === '/relative') {
      res.writeHead(307, { location: 'ok' }).end();
    } else {
      res.writeHead(404).end();
    }
  });
});

afterAll(() => origin.close());

/** Only loopback (this machine) besides public addresses: no test ever reaches another address. */
const LOOPBACK_ONLY = new Set<AddressClass>(['loopback']);

function options(over: Partial<OriginFetchOptions> = {}): OriginFetchOptions {
  return {
    allowedOrigins: '*',
    allowPrivateOrigins: false,
    allowedClasses: LOOPBACK_ONLY,
    maxBytes: 1_000_000,
    headersTimeoutMs: 2000,
    totalTimeoutMs: 5000,
    ...over,
  };
}

async function failure(promise: Promise<unknown>): Promise<ServeError> {
  try {
    await promise;
  } catch (e) {
    expect(e).toBeInstanceOf(ServeError);
    return e as ServeError;
  }
  throw new Error('expected the fetch to fail');
}

async function expectKind(promise: Promise<unknown>, kind: ServeErrorKind, text?: string | RegExp): Promise<void> {
  const e = await failure(promise);
  expect(e.kind).toBe(kind);
  if (text) expect(e.message).toMatch(text);
}

describe('fetchOrigin', () => {
  test('200 with Content-Length: bytes, content type, anonymous identity GET', async () => {
    const got = await fetchOrigin(`${origin.url}/ok`, options());
    expect(Buffer.from(got.bytes).equals(Buffer.from(BODY))).toBe(true);
    expect(got.contentType).toBe('video/mp2t');
    expect(got.redirects).toBe(0);
    expect(lastHeaders['accept-encoding']).toBe('identity');
    expect(lastHeaders.cookie).toBeUndefined();
    expect(lastHeaders.authorization).toBeUndefined();
  });

  test('chunked body without length, and an empty body', async () => {
    const got = await fetchOrigin(`${origin.url}/chunked`, options());
    expect(Buffer.from(got.bytes).equals(Buffer.from(BODY))).toBe(true);
    expect((await fetchOrigin(`${origin.url}/empty`, options())).bytes.length).toBe(0);
  });

  test('404 and 410 are not-found, 500 is origin-error', async () => {
    await expectKind(fetchOrigin(`${origin.url}/nothing`, options()), 'not-found', /404/);
    await expectKind(fetchOrigin(`${origin.url}/gone`, options()), 'not-found', /410/);
    await expectKind(fetchOrigin(`${origin.url}/fail`, options()), 'origin-error', /500/);
  });

  test('onBody sees each chunk of the final response as it is kept, in order, and only those', async () => {
    for (const path of ['/ok', '/chunked', '/relative']) {
      const seen: Uint8Array[] = [];
      const got = await fetchOrigin(`${origin.url}${path}`, options({ onBody: (chunk) => seen.push(chunk) }));
      expect(seen.length).toBeGreaterThan(0);
      expect(Buffer.concat(seen).equals(Buffer.from(got.bytes))).toBe(true); // not the redirect's body
    }
    // A chunk the memory budget refuses is never handed on: the children would hold bytes the
    // parent dropped.
    const handed: number[] = [];
    let allowed = 1;
    await expectKind(
      fetchOrigin(
        `${origin.url}/chunked`,
        options({ reserve: () => allowed-- > 0, onBody: (c) => handed.push(c.length) }),
      ),
      'overloaded',
    );
    expect(handed).toHaveLength(1);
  });

  test('a hanging origin times out within the configured bound', async () => {
    const started = Date.now();
    await expectKind(fetchOrigin(`${origin.url}/hang`, options({ headersTimeoutMs: 300 })), 'timeout', /headers/);
    // Bounded: well before the total timeout (generous margin, not a timing assertion on speed).
    expect(Date.now() - started).toBeLessThan(4500);
    await expectKind(
      fetchOrigin(`${origin.url}/slow-body`, options({ headersTimeoutMs: 2000, totalTimeoutMs: 400 })),
      'timeout',
    );
  });

  test('a body shorter than its Content-Length is an origin error', async () => {
    await expectKind(fetchOrigin(`${origin.url}/short`, options()), 'origin-error');
  });

  test('too large: by Content-Length and by counting a chunked body', async () => {
    await expectKind(fetchOrigin(`${origin.url}/big-declared`, options()), 'too-large', /10000000/);
    await expectKind(fetchOrigin(`${origin.url}/big-chunked`, options()), 'too-large');
  });

  test('a compressed answer despite accept-encoding identity is refused', async () => {
    await expectKind(fetchOrigin(`${origin.url}/gzip`, options()), 'origin-error', /gzip/);
  });

  test('redirects are followed (relative too), at most 5', async () => {
    const to = encodeURIComponent(`${origin.url}/ok`);
    const got = await fetchOrigin(`${origin.url}/redirect-to?${to}`, options());
    expect(got.redirects).toBe(1);
    expect(got.finalUrl).toBe(`${origin.url}/ok`);
    expect((await fetchOrigin(`${origin.url}/relative`, options())).bytes.length).toBe(BODY.length);
    await expectKind(fetchOrigin(`${origin.url}/loop/0`, options()), 'origin-error', /redirects/);
  });

  test('a redirect to a private address is refused before connecting', async () => {
    const hits = origin.hits;
    const to = encodeURIComponent('http://10.1.2.3/secret');
    await expectKind(fetchOrigin(`${origin.url}/redirect-to?${to}`, options()), 'refused', /10\.1\.2\.3/);
    const mapped = encodeURIComponent('http://[::ffff:169.254.169.254]/latest/meta-data');
    await expectKind(fetchOrigin(`${origin.url}/redirect-to?${mapped}`, options()), 'refused', /not allowed/);
    expect(origin.hits).toBe(hits + 2); // only the redirecting origin was contacted
  });

  test('a redirect to a host name that resolves to a private address is refused', async () => {
    const lookup: LookupAll = async (host) =>
      host === 'internal.test' ? [{ address: '192.168.1.10', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
    const to = encodeURIComponent('http://internal.test/admin');
    await expectKind(fetchOrigin(`${origin.url}/redirect-to?${to}`, options({ lookup })), 'refused', /192\.168/);
  });

  test('loopback is refused without allowPrivateOrigins (literal and by name)', async () => {
    const hits = origin.hits;
    const strict = { allowPrivateOrigins: false, allowedClasses: undefined };
    await expectKind(fetchOrigin(`${origin.url}/ok`, options(strict)), 'refused', /loopback/);
    const port = new URL(origin.url).port;
    const lookup: LookupAll = async () => [{ address: '127.0.0.1', family: 4 }];
    await expectKind(
      fetchOrigin(`http://cdn.test:${port}/ok`, options({ ...strict, lookup })),
      'refused',
      /resolves to 127\.0\.0\.1/,
    );
    // A name with one public and one private address is refused as a whole.
    const mixed: LookupAll = async () => [
      { address: '93.184.216.34', family: 4 },
      { address: 'fd00::1', family: 6 },
    ];
    await expectKind(
      fetchOrigin('http://mixed.test/ok', options({ ...strict, lookup: mixed })),
      'refused',
      /unique-local/,
    );
    expect(origin.hits).toBe(hits);
  });

  test('the connection goes to the checked address, whatever the name resolves to later', async () => {
    let calls = 0;
    // A rebinding resolver answers differently on a second lookup; there must be none.
    const lookup: LookupAll = async () => {
      calls++;
      return calls === 1 ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '127.0.0.2', family: 4 }];
    };
    const port = new URL(origin.url).port;
    const got = await fetchOrigin(`http://rebind.test:${port}/ok`, options({ lookup }));
    expect(got.bytes.length).toBe(BODY.length);
    expect(calls).toBe(1);
    expect(lastHeaders.host).toBe(`rebind.test:${port}`);
  });

  test('unknown hosts are not-found', async () => {
    const lookup: LookupAll = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    };
    await expectKind(fetchOrigin('http://nowhere.test/x', options({ lookup })), 'not-found', /unknown host/);
  });

  test('URLs outside allowedOrigins, other schemes and credentials are refused', async () => {
    const hits = origin.hits;
    await expectKind(
      fetchOrigin(`${origin.url}/ok`, options({ allowedOrigins: ['https://cdn.example.com'] })),
      'refused',
      /not allowed/,
    );
    await expectKind(fetchOrigin('file:///etc/passwd', options()), 'refused', /scheme file:/);
    await expectKind(fetchOrigin('ftp://example.com/x', options()), 'refused', /scheme/);
    await expectKind(
      fetchOrigin(`http://user:pw@127.0.0.1:${new URL(origin.url).port}/ok`, options()),
      'refused',
      /credentials/,
    );
    await expectKind(fetchOrigin('not a url', options()), 'refused', /valid/);
    // A redirect out of the allowed origins is refused too.
    const to = encodeURIComponent('http://127.0.0.2:1/elsewhere');
    await expectKind(
      fetchOrigin(`${origin.url}/redirect-to?${to}`, options({ allowedOrigins: [origin.url] })),
      'refused',
      /origin http:\/\/127\.0\.0\.2:1 is not allowed/,
    );
    expect(origin.hits).toBe(hits + 1);
  });

  test('allowed origins compare by scheme, host and port', () => {
    const policy = { allowedOrigins: ['https://cdn.example.com'], allowPrivateOrigins: false };
    expect(checkUrl('https://cdn.example.com/a/b.ts?x=1', policy).href).toBe('https://cdn.example.com/a/b.ts?x=1');
    expect(() => checkUrl('http://cdn.example.com/a', policy)).toThrow(ServeError);
    expect(() => checkUrl('https://cdn.example.com:8443/a', policy)).toThrow(ServeError);
    expect(() => checkUrl('https://evil.example.com/a', policy)).toThrow(ServeError);
  });
});

describe('address classifier', () => {
  const table: [string, AddressClass][] = [
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['172.15.255.255', 'public'],
    ['192.168.0.1', 'private'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['100.128.0.1', 'public'],
    ['169.254.169.254', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['198.18.0.1', 'reserved'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:8.8.8.8', 'public'],
    ['::127.0.0.1', 'reserved'],
    ['64:ff9b::10.0.0.1', 'private'],
    ['64:ff9b::8.8.8.8', 'public'],
    ['2002:0a00:0001::1', 'private'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'private'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['2001::1', 'reserved'],
    ['2001:2::1', 'reserved'],
    ['2001:1ff:ffff::1', 'reserved'],
    ['2001:200::1', 'public'],
    ['3fff:fff::1', 'documentation'],
    ['3fff:1000::1', 'public'],
    ['3ffe::1', 'public'],
    ['2001:4860:4860::8888', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['4000::1', 'reserved'],
    ['example.com', 'invalid'],
    ['1.2.3', 'invalid'],
    ['01.2.3.4', 'invalid'],
  ];
  test.each(table)('%s is %s', (address, cls) => {
    expect(classifyAddress(address)).toBe(cls);
  });

  test('allowPrivateOrigins opens private ranges but never multicast, broadcast or unspecified', () => {
    expect(isAddressAllowed('8.8.8.8', false)).toBe(true);
    for (const a of ['127.0.0.1', '10.0.0.1', '169.254.1.1', 'fd00::1', '::1', '100.64.0.1'])
      expect([a, isAddressAllowed(a, false), isAddressAllowed(a, true)]).toEqual([a, false, true]);
    for (const a of ['0.0.0.0', '::', '224.0.0.1', 'ff02::1', '255.255.255.255', 'nonsense'])
      expect([a, isAddressAllowed(a, true)]).toEqual([a, false]);
  });
});
