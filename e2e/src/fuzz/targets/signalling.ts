/** The signalling parser (`shared/src/signalling.ts` parseSignal) over all four message schemas. */
import fc from 'fast-check';
import { clientToOrigo, MAX_SIGNAL_BYTES, origoToClient, origoToProxy, parseSignal, proxyToOrigo } from '@mutp/shared';
import { FuzzTarget, invariant, jsonBytes, mutatedText, rawBytes, utf8 } from '../target';

type Schema = Parameters<typeof parseSignal>[0];

const SCHEMAS: readonly [string, Schema][] = [
  ['proxyToOrigo', proxyToOrigo],
  ['origoToProxy', origoToProxy],
  ['clientToOrigo', clientToOrigo],
  ['origoToClient', origoToClient],
];

const sdp = 'v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n';
const candidate = { candidate: 'candidate:1 1 UDP 2122252543 192.0.2.1 50000 typ host', mid: '0' };
const record = {
  url: 'https://cdn.example/v/seg-1.m4s',
  mode: 'rlnc',
  scheduler: 'partitioned',
  sources: 2,
  bytes: 1_900_000,
  durationMs: 812.5,
  goodputBps: 2_300_000,
  normalizedGoodput: 0.93,
  status: 'complete',
  proxies: [
    { proxyId: 'p-1', received: 900, useful: 880, share: 0.5 },
    { proxyId: 'p-2', received: 910, useful: 890, share: 0.5 },
  ],
};

/** Valid messages of every type, in the shape each side sends them. */
const VALID: Record<string, unknown>[] = [
  {
    type: 'register',
    version: 1,
    secret: 's3cret',
    proxyId: 'edge-1',
    name: 'edge 1',
    httpUrl: 'https://edge-1.example:8443/',
    capacityBps: 896_000,
    maxTransfers: 64,
    modes: ['uncoded', 'rlnc', 'fountain'],
    assertionKey: 'kAJ0vQ2Pq3vQw1b6d1Bz7Sx5uS3Qy8Jb0mHc5gX2T4E',
  },
  { type: 'heartbeat', activeTransfers: 3, uploadBps: 500_000, capacityBps: 896_000 },
  { type: 'signal', connectionId: 'c-1', description: { type: 'answer', sdp } },
  { type: 'signal', connectionId: 'c-1', candidate },
  { type: 'connection-closed', connectionId: 'c-1', reason: 'peer gone' },
  { type: 'registered', proxyId: 'edge-1', heartbeatIntervalMs: 5000 },
  { type: 'signal', connectionId: 'c-1', clientId: 'cl-7', description: { type: 'offer', sdp } },
  { type: 'error', code: 'bad-secret', message: 'no' },
  { type: 'hello', version: 1 },
  { type: 'request-proxies', requestId: 'r1', count: 4, mode: 'rlnc', exclude: ['edge-2'] },
  { type: 'signal', connectionId: 'c-1', proxyId: 'edge-1', candidate },
  { type: 'record', record },
  { type: 'welcome', clientId: 'cl-7' },
  {
    type: 'proxies',
    requestId: 'r1',
    proxies: [{ proxyId: 'edge-1', name: 'edge 1', httpUrl: 'http://127.0.0.1:8701/', capacityBps: 896_000 }],
  },
  { type: 'error', code: 'no-proxies', message: 'none', requestId: 'r1' },
];

/** Values that break schemas in interesting ways (types, bounds, prototype keys, sizes). */
const oddValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(
    null,
    -1,
    0,
    1.5,
    1e308,
    -0,
    2 ** 53,
    '',
    'x'.repeat(65),
    'javascript:alert(1)',
    'http://[::1]/',
    [],
    {},
    { __proto__: { polluted: true } },
    'signal',
  ),
);

type Path = (string | number)[];

function paths(value: unknown, prefix: Path = []): Path[] {
  if (value === null || typeof value !== 'object') return [prefix];
  const keys = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
  return [prefix, ...keys.flatMap((k) => paths((value as Record<string | number, unknown>)[k], [...prefix, k]))];
}

/** A copy of `message` with the value at one path replaced, removed, or a key added beside it. */
function edit(message: unknown, at: number, op: number, key: string, value: unknown): unknown {
  const copy = structuredClone(message) as Record<string, unknown>;
  const all = paths(copy).filter((p) => p.length > 0);
  const path = all[at % all.length];
  let parent: Record<string | number, unknown> = copy;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (op === 0) parent[last] = value;
  else if (op === 1) delete parent[last];
  else Object.defineProperty(parent, key, { value, enumerable: true, configurable: true, writable: true });
  return copy;
}

const validText = fc.constantFrom(...VALID).map((m) => JSON.stringify(m));
const editedText = fc
  .tuple(
    fc.constantFrom(...VALID),
    fc.nat(),
    fc.nat(2),
    fc.constantFrom('__proto__', 'constructor', 'type', 'extra', 'prototype'),
    oddValue,
  )
  .map(([m, at, op, key, value]) => JSON.stringify(edit(m, at, op, key, value)));
const deepNesting = fc
  .tuple(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('[', '{"a":'))
  .map(([depth, open]) => open.repeat(depth) + '1' + (open === '[' ? ']' : '}').repeat(depth));
const oversized = fc.integer({ min: MAX_SIGNAL_BYTES - 2, max: MAX_SIGNAL_BYTES + 2 }).map((n) => {
  const head = '{"type":"hello","version":1,"pad":"';
  return head + 'a'.repeat(Math.max(0, n - head.length - 2)) + '"}';
});

export interface SignalInput {
  schema: number;
  frame: string | Uint8Array;
}

export const signallingTarget: FuzzTarget<SignalInput> = {
  name: 'signalling',
  about: 'signalling frames (shared/src/signalling.ts parseSignal), all four message schemas',
  inputs: fc.record({
    schema: fc.nat(SCHEMAS.length - 1),
    frame: fc.oneof(
      { weight: 1, arbitrary: validText },
      { weight: 4, arbitrary: editedText },
      { weight: 2, arbitrary: mutatedText(fc.oneof(validText, editedText)) },
      { weight: 1, arbitrary: fc.oneof(validText, editedText).map(utf8) },
      { weight: 1, arbitrary: rawBytes(2000) },
      { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
      { weight: 1, arbitrary: fc.oneof(deepNesting, oversized) },
    ),
  }),
  check({ schema, frame }) {
    const result = parseSignal(SCHEMAS[schema][1], frame);
    invariant(({} as Record<string, unknown>).polluted === undefined, 'Object.prototype was polluted');
    if (!result.ok) {
      invariant(typeof result.error === 'string' && result.error.length > 0, 'a refusal without an error text');
      return;
    }
    // What is accepted is a fixed point: the value sent on as JSON parses to the same value.
    const again = parseSignal(SCHEMAS[schema][1], JSON.stringify(result.value));
    invariant(again.ok, `an accepted message does not parse again: ${again.ok ? '' : again.error}`);
    invariant(
      JSON.stringify(again.value) === JSON.stringify(result.value),
      'an accepted message changes when parsed again',
    );
  },
  bytes: ({ schema, frame }) => jsonBytes({ schema: SCHEMAS[schema][0], frame }),
};
