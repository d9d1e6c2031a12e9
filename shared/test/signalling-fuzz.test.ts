/**
 * Property tests of the signalling parser (src/signalling.ts parseSignal): valid messages of every
 * type round-trip, a leaf of the wrong JSON type anywhere is refused with its path in the error,
 * and no frame (any bytes, any JSON, deep nesting, prototype keys, oversize) throws.
 */
import fc from 'fast-check';
import { clientToOrigo, MAX_SIGNAL_BYTES, origoToClient, origoToProxy, parseSignal, proxyToOrigo } from '../src';

const PARAMS = { seed: 5, numRuns: 400 };
type Schema = Parameters<typeof parseSignal<unknown>>[0];
const id = fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/);
const sdp = fc.string({ minLength: 1, maxLength: 200 });
const description = fc.record({ type: fc.constantFrom('offer', 'answer'), sdp });
const candidate = fc.record({ candidate: fc.string({ maxLength: 100 }), mid: fc.string({ maxLength: 8 }) });
const rate = fc.double({ min: 0, max: 1e12, noNaN: true, noDefaultInfinity: true });
const count = fc.nat(1_000_000);
const descriptionOrCandidate = fc.oneof(
  description.map((d) => ({ description: d })),
  candidate.map((c) => ({ candidate: c })),
);

/** A compact JWS as origo issues them (three base64url parts). */
const base64url = fc.stringMatching(/^[A-Za-z0-9_-]{4,86}$/);
const jwt = fc.tuple(base64url, base64url, base64url).map((parts) => parts.join('.'));
const tokenKey = fc.record(
  {
    kty: fc.constant('OKP'),
    crv: fc.constant('Ed25519'),
    x: base64url,
    kid: fc.string({ maxLength: 128 }),
    alg: fc.constant('EdDSA'),
  },
  { requiredKeys: ['kty', 'crv', 'x'] },
);

const schemas: { schema: Schema; message: fc.Arbitrary<unknown> }[] = [
  {
    schema: proxyToOrigo,
    message: fc.oneof(
      fc.record({
        type: fc.constant('register'),
        version: fc.constant(1),
        secret: fc.string({ minLength: 1, maxLength: 256 }),
        proxyId: id,
        name: fc.string({ minLength: 1, maxLength: 128 }),
        httpUrl: fc.webUrl({ size: 'small' }).filter((u) => u.length <= 512),
        capacityBps: rate,
        maxTransfers: fc.integer({ min: 1, max: 100_000 }),
        modes: fc.uniqueArray(fc.constantFrom('uncoded', 'rlnc', 'fountain'), { minLength: 1, maxLength: 3 }),
        assertionKey: fc.uint8Array({ minLength: 32, maxLength: 32 }).map((k) => Buffer.from(k).toString('base64url')),
      }),
      fc.record({ type: fc.constant('heartbeat'), activeTransfers: count, uploadBps: rate, capacityBps: rate }),
      fc.tuple(id, descriptionOrCandidate).map(([connectionId, x]) => ({ type: 'signal', connectionId, ...x })),
      fc.record({ type: fc.constant('connection-closed'), connectionId: id, reason: fc.string({ maxLength: 256 }) }),
    ),
  },
  {
    schema: origoToProxy,
    message: fc.oneof(
      fc.record({
        type: fc.constant('registered'),
        proxyId: id,
        heartbeatIntervalMs: fc.integer({ min: 100, max: 1e9 }),
        tokenKey: tokenKey,
      }),
      fc
        .tuple(id, id, descriptionOrCandidate)
        .map(([connectionId, clientId, x]) => ({ type: 'signal', connectionId, clientId, ...x })),
      fc.record({
        type: fc.constant('error'),
        code: fc.string({ maxLength: 64 }),
        message: fc.string({ maxLength: 512 }),
      }),
    ),
  },
  {
    schema: clientToOrigo,
    message: fc.oneof(
      fc.record({ type: fc.constant('hello'), version: fc.constant(1) }),
      fc.record({ type: fc.constant('hello'), version: fc.constant(1), token: jwt }),
      fc.record({ type: fc.constant('report'), proxyId: id, kind: fc.constantFrom('meta', 'digests', 'data') }),
      fc.record({
        type: fc.constant('conflict'),
        url: fc.webUrl({ size: 'small' }).filter((u) => u.length <= 4096),
        statements: fc.array(
          fc.record({
            proxyId: id,
            meta: fc.uint8Array({ minLength: 78, maxLength: 419 }).map((b) => Buffer.from(b).toString('base64')),
          }),
          { minLength: 2, maxLength: 4 },
        ),
      }),
      fc.record({
        type: fc.constant('request-proxies'),
        requestId: id,
        count: fc.integer({ min: 1, max: 32 }),
        mode: fc.constantFrom('uncoded', 'rlnc', 'fountain'),
        exclude: fc.array(id, { maxLength: 5 }),
      }),
      fc
        .tuple(id, id, descriptionOrCandidate)
        .map(([connectionId, proxyId, x]) => ({ type: 'signal', connectionId, proxyId, ...x })),
    ),
  },
  {
    schema: origoToClient,
    message: fc.oneof(
      fc.record({ type: fc.constant('welcome'), clientId: id, token: jwt, expiresAt: fc.nat() }),
      fc.record({ type: fc.constant('token'), token: jwt, expiresAt: fc.nat() }),
      fc.record({
        type: fc.constant('proxies'),
        requestId: id,
        proxies: fc.array(
          fc.record({
            proxyId: id,
            name: fc.string({ maxLength: 128 }),
            httpUrl: fc.webUrl({ size: 'small' }).filter((u) => u.length <= 512),
            capacityBps: rate,
          }),
          { maxLength: 4 },
        ),
      }),
    ),
  },
];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Every (path, leaf) of a JSON value. */
function leaves(value: Json, path: (string | number)[] = []): [(string | number)[], Json][] {
  if (value === null || typeof value !== 'object') return [[path, value]];
  const entries: [string | number, Json][] = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  return entries.flatMap(([k, v]) => leaves(v, [...path, k]));
}

function setAt(value: Json, path: (string | number)[], leaf: Json): Json {
  const copy = structuredClone(value) as Record<string | number, Json>;
  let parent = copy;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, Json>;
  parent[path[path.length - 1]] = leaf;
  return copy;
}

describe.each(schemas.map((s, i) => [i, s] as const))('schema %i', (_i, { schema, message }) => {
  test('valid messages parse to themselves, from text and from UTF-8 bytes', () => {
    fc.assert(
      fc.property(message, (m) => {
        const text = JSON.stringify(m);
        for (const frame of [text, new TextEncoder().encode(text)]) {
          const parsed = parseSignal(schema, frame);
          if (!parsed.ok) throw new Error(`${text} refused: ${parsed.error}`);
          expect(parsed.value).toEqual(m);
        }
      }),
      PARAMS,
    );
  });

  test('a leaf of the wrong JSON type anywhere is refused, and the error names where', () => {
    fc.assert(
      fc.property(message, fc.nat(), (m, pick) => {
        const all = leaves(m as Json);
        const [path, leaf] = all[pick % all.length];
        const wrong: Json = typeof leaf === 'number' ? String(leaf) : typeof leaf === 'string' ? 12 : 'x';
        const parsed = parseSignal(schema, JSON.stringify(setAt(m as Json, path, wrong)));
        expect(parsed.ok).toBe(false);
        if (!parsed.ok && path.length > 1) expect(parsed.error.startsWith(`${path.join('.')}:`)).toBe(true);
      }),
      PARAMS,
    );
  });
});

test('no frame throws: arbitrary bytes, JSON values, deep nesting, prototype keys, oversize', () => {
  const frame = fc.oneof(
    fc.uint8Array({ maxLength: 300 }),
    fc.string({ maxLength: 300 }),
    fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
    fc.constantFrom(
      '{"__proto__":{"polluted":1},"type":"hello","version":1}',
      '{"constructor":{"prototype":{"polluted":1}}}',
    ),
    fc.integer({ min: 1, max: 30_000 }).map((n) => '['.repeat(n) + ']'.repeat(n)),
    fc.integer({ min: 1, max: 10_000 }).map((n) => '{"type":'.repeat(n) + '1' + '}'.repeat(n)),
  );
  fc.assert(
    fc.property(frame, fc.nat(schemas.length - 1), (f, s) => {
      const parsed = parseSignal(schemas[s].schema, f);
      if (!parsed.ok) expect(typeof parsed.error).toBe('string');
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    }),
    { seed: 5, numRuns: 1000 },
  );
  const big = `{"type":"hello","version":1,"pad":"${'a'.repeat(MAX_SIGNAL_BYTES)}"}`;
  expect(parseSignal(clientToOrigo, big)).toEqual({ ok: false, error: expect.stringMatching(/exceeds/) });
});
