/**
 * Ranged origin fetches against a local node:http origin that answers each path in one way: a
 * correct 206, a short 206 at the end of the resource, 206s that lie (wrong start, wrong length,
 * a body longer than the range), a 200 that ignores Range (small, declared huge, streamed huge)
 * and 416. The proxy must take only what answers the range and never buffer past its cap.
 */
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { ByteRange } from '@mutp/shared';
import { fetchOrigin, MAX_REPR_DIGEST_CHARS, MAX_VALIDATOR_CHARS, OriginFetchOptions } from '@mutp/origin-fetch';
import { parseContentRange, partialProblem } from '@mutp/origin-fetch';
import { expectKind, LOOPBACK_ONLY, makeObject, startServer, TestServer } from './helpers';

const FILE = makeObject(10_000, 11);
const REPR_DIGEST = `sha-256=:${createHash('sha256').update(FILE).digest('base64')}:`;
const MAX_BYTES = 4000;
let origin: TestServer;
let lastRange: string | undefined;
/** Bytes the origin wrote to the huge streams before the proxy hung up. */
let streamed = 0;

/** A correct 206 for `range` of FILE (no Content-Length: chunked, as many origins do). */
function partial(
  res: ServerResponse,
  first: number,
  last: number,
  total: string,
  body = FILE.subarray(first, last + 1),
) {
  res.writeHead(206, { 'content-range': `bytes ${first}-${last}/${total}`, 'content-type': 'video/mp4' });
  res.end(body);
}

function streamForever(res: ServerResponse): void {
  const chunk = new Uint8Array(16 * 1024);
  const more = () => {
    while (!res.destroyed && streamed < 50_000_000) {
      streamed += chunk.length;
      if (!res.write(chunk)) return void res.once('drain', more);
    }
    res.end();
  };
  res.on('close', () => undefined);
  more();
}

beforeAll(async () => {
  origin = await startServer((req, res) => {
    lastRange = req.headers.range;
    const match = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    const first = match ? Number(match[1]) : 0;
    const last = match ? Number(match[2]) : 0;
    const path = req.url ?? '';
    if (path === '/ranged') {
      if (first >= FILE.length) return void res.writeHead(416, { 'content-range': `bytes */${FILE.length}` }).end();
      const end = Math.min(last, FILE.length - 1);
      res.writeHead(206, {
        'content-range': `bytes ${first}-${end}/${FILE.length}`,
        'content-length': end - first + 1,
        'content-type': 'video/mp4',
        etag: '"v1"',
        'last-modified': 'Tue, 01 Apr 2025 10:00:00 GMT',
        'repr-digest': REPR_DIGEST,
      });
      res.end(FILE.subarray(first, end + 1));
    } else if (path === '/star') partial(res, first, last, '*');
    else if (path === '/short-no-total') partial(res, first, last - 10, '*');
    else if (path === '/short-early') partial(res, first, last - 10, String(FILE.length));
    else if (path === '/wrong-start') partial(res, first + 1, last, String(FILE.length));
    else if (path === '/past-end') partial(res, first, last + 5, String(FILE.length));
    else if (path === '/wrong-length')
      partial(res, first, last, String(FILE.length), FILE.subarray(first, last)); // one byte short
    else if (path === '/longer-body') partial(res, first, last, String(FILE.length), FILE.subarray(first, last + 500));
    else if (path === '/length-mismatch') {
      res.writeHead(206, { 'content-range': `bytes ${first}-${last}/${FILE.length}`, 'content-length': 5 });
      res.end(FILE.subarray(first, first + 5));
    } else if (path === '/no-content-range') res.writeHead(206).end(FILE.subarray(first, last + 1));
    else if (path === '/multipart')
      res.writeHead(206, { 'content-type': 'multipart/byteranges; boundary=x' }).end('--x--');
    else if (path === '/ignores') {
      res.writeHead(200, { 'content-length': 3000, 'content-type': 'video/mp4', etag: '"w"' });
      res.end(FILE.subarray(0, 3000));
    } else if (path === '/ignores-huge-declared') {
      res.writeHead(200, { 'content-length': 100_000_000 });
      streamForever(res);
    } else if (path === '/ignores-huge-chunked') {
      res.writeHead(200);
      streamForever(res);
    } else if (path === '/unsatisfiable') res.writeHead(416).end();
    else if (path === '/unasked-206') partial(res, 0, 99, String(FILE.length));
    else if (path === '/bad-headers') {
      res.writeHead(206, {
        'content-range': `bytes ${first}-${last}/${FILE.length}`,
        'content-type': `video/mp4; x=${'a'.repeat(200)}`, // longer than META carries
        etag: `"${'e'.repeat(MAX_VALIDATOR_CHARS + 1)}"`,
        'repr-digest': `sha-256=:${'A'.repeat(MAX_REPR_DIGEST_CHARS)}=:`,
      });
      res.end(FILE.subarray(first, last + 1));
    } else res.writeHead(404).end();
  });
});

afterAll(() => origin.close());

function options(over: Partial<OriginFetchOptions> = {}): OriginFetchOptions {
  return {
    allowedOrigins: '*',
    allowPrivateOrigins: false,
    allowedClasses: LOOPBACK_ONLY,
    maxBytes: MAX_BYTES,
    headersTimeoutMs: 2000,
    totalTimeoutMs: 5000,
    ...over,
  };
}

const ranged = (path: string, range: ByteRange, over: Partial<OriginFetchOptions> = {}) =>
  fetchOrigin(`${origin.url}${path}`, options({ range, ...over }));

describe('206 answers', () => {
  test('sends Range and takes a 206 with the asked bytes, its place and validators', async () => {
    const got = await ranged('/ranged', { start: 1000, length: 2500 });
    expect(lastRange).toBe('bytes=1000-3499');
    expect(Buffer.from(got.bytes).equals(Buffer.from(FILE.subarray(1000, 3500)))).toBe(true);
    expect(got.range).toEqual({ start: 1000, completeLength: FILE.length });
    expect(got.contentType).toBe('video/mp4');
    expect(got.etag).toBe('"v1"');
    expect(got.lastModified).toBe('Tue, 01 Apr 2025 10:00:00 GMT');
    // The whole representation's digest, also on a 206: what a shield child checks its parent's copy against.
    expect(got.reprDigest).toBe(REPR_DIGEST);
    expect(got.wholeBody).toBeUndefined();
  });

  test('a 206 short at the end of the resource, with its total, is the answer', async () => {
    const got = await ranged('/ranged', { start: 9000, length: 3000 });
    expect(got.bytes.length).toBe(1000);
    expect(Buffer.from(got.bytes).equals(Buffer.from(FILE.subarray(9000)))).toBe(true);
    expect(got.range).toEqual({ start: 9000, completeLength: FILE.length });
  });

  test('a complete length of * is passed on as unknown', async () => {
    const got = await ranged('/star', { start: 10, length: 100 });
    expect(got.range).toEqual({ start: 10, completeLength: undefined });
    expect(got.bytes.length).toBe(100);
  });

  test.each([
    ['/wrong-start', /from 11, asked from 10/],
    ['/past-end', /up to 114, asked up to 109/],
    ['/short-no-total', /without the complete length/],
    ['/short-early', /before the end of the resource/],
    ['/wrong-length', /body of 99 bytes, expected 100/],
    ['/longer-body', /more bytes than its Content-Range/],
    ['/length-mismatch', /Content-Length 5 does not match/],
    ['/no-content-range', /without a valid single Content-Range/],
    ['/multipart', /without a valid single Content-Range/],
  ])('%s is an origin error', async (path, text) => {
    await expectKind(ranged(path, { start: 10, length: 100 }), 'origin-error', text);
  });

  test('416 is range-not-satisfiable', async () => {
    await expectKind(ranged('/unsatisfiable', { start: 5, length: 10 }), 'range-not-satisfiable');
    await expectKind(ranged('/ranged', { start: FILE.length, length: 10 }), 'range-not-satisfiable');
  });

  test('without a range, a 206 is an origin error and a 416 too', async () => {
    await expectKind(
      fetchOrigin(`${origin.url}/unasked-206`, options()),
      'origin-error',
      /206 to a request without Range/,
    );
    await expectKind(fetchOrigin(`${origin.url}/unsatisfiable`, options()), 'origin-error', /416/);
  });

  test('a Content-Type META cannot carry and over-long validators are dropped', async () => {
    const got = await ranged('/bad-headers', { start: 0, length: 10 });
    expect(got.contentType).toBeUndefined();
    expect(got.etag).toBeUndefined();
    expect(got.reprDigest).toBeUndefined();
  });

  test('a range longer than the cap is refused before any request', async () => {
    const hits = origin.hits;
    await expectKind(ranged('/ranged', { start: 0, length: MAX_BYTES + 1 }), 'too-large');
    expect(origin.hits).toBe(hits);
  });

  test('the resource may be far larger than the cap: only the range counts', async () => {
    // /ranged says the file has 10 000 bytes, more than the 4000-byte cap.
    const got = await ranged('/ranged', { start: 5000, length: MAX_BYTES });
    expect(got.bytes.length).toBe(MAX_BYTES);
  });
});

describe('200 answers (the origin ignores Range)', () => {
  test('a whole body within the cap is sliced, and kept whole for the cache', async () => {
    const got = await ranged('/ignores', { start: 2500, length: 1000 });
    expect(Buffer.from(got.bytes).equals(Buffer.from(FILE.subarray(2500, 3000)))).toBe(true);
    expect(got.range).toEqual({ start: 2500, completeLength: 3000 });
    expect(got.wholeBody?.length).toBe(3000);
    expect(got.etag).toBe('"w"');
  });

  test('a range past the end of the whole body is range-not-satisfiable', async () => {
    await expectKind(ranged('/ignores', { start: 3000, length: 10 }), 'range-not-satisfiable');
  });

  test('a declared body over the cap is refused at once, nothing buffered', async () => {
    let charged = 0;
    const reserve = (n: number) => ((charged += n), true);
    await expectKind(
      ranged('/ignores-huge-declared', { start: 0, length: 100 }, { reserve }),
      'origin-error',
      /ignores Range and the resource is larger than 4000/,
    );
    expect(charged).toBe(0);
  });

  test('a streamed body over the cap is cut at the cap', async () => {
    let charged = 0;
    const reserve = (n: number) => ((charged += n), true);
    await expectKind(
      ranged('/ignores-huge-chunked', { start: 0, length: 100 }, { reserve }),
      'origin-error',
      /ignores Range/,
    );
    expect(charged).toBeLessThanOrEqual(MAX_BYTES);
  });
});

describe('Content-Range parsing', () => {
  test.each([
    ['bytes 0-9/10', { first: 0, last: 9, completeLength: 10 }],
    ['bytes 5-9/*', { first: 5, last: 9, completeLength: undefined }],
    ['bytes 9-5/10', undefined],
    ['bytes 0-10/10', undefined],
    ['bytes */10', undefined],
    ['bytes 0-9/10, 20-29/30', undefined],
    ['items 0-9/10', undefined],
    ['bytes 00000000000000000-1/2', undefined],
    [undefined, undefined],
  ])('%j', (value, parsed) => {
    expect(parseContentRange(value)).toEqual(parsed);
  });

  test('a short answer is accepted only at the end of a known length', () => {
    const asked = { start: 100, length: 50 };
    expect(partialProblem(asked, { first: 100, last: 149, completeLength: undefined })).toBeUndefined();
    expect(partialProblem(asked, { first: 100, last: 119, completeLength: 120 })).toBeUndefined();
    expect(partialProblem(asked, { first: 100, last: 119, completeLength: 500 })).toMatch(/before the end/);
  });
});
