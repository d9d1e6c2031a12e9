/** Property tests of Range header parsing (extension/src/common/media.ts). */
import fc from 'fast-check';
import { ByteRangeSpec, formatRange, parseRangeHeader, resolveRange } from '../src/common/media';

const PARAMS = { seed: 7, numRuns: 2000 };
const safe = fc.oneof(fc.nat(), fc.maxSafeNat(), fc.constantFrom(0, Number.MAX_SAFE_INTEGER));
const ws = fc.constantFrom('', ' ', '\t', '  ');
const unit = fc.constantFrom('bytes', 'BYTES', 'Bytes');

test('a single range in any spacing and case parses to exactly its numbers, and formats back', () => {
  const spec: fc.Arbitrary<ByteRangeSpec> = fc.oneof(
    fc.tuple(safe, safe).map(([a, b]) => ({ kind: 'from' as const, start: Math.min(a, b), end: Math.max(a, b) })),
    safe.map((start) => ({ kind: 'from' as const, start })),
    safe.map((length) => ({ kind: 'suffix' as const, length })),
  );
  fc.assert(
    fc.property(spec, unit, ws, ws, ws, ws, (r, u, s1, s2, s3, s4) => {
      const numbers =
        r.kind === 'suffix' ? `${s3}-${s4}${r.length}` : `${r.start}${s3}-${s4}${r.end === undefined ? '' : r.end}`;
      const parsed = parseRangeHeader(`${s1}${u}${s2}=${s2}${numbers}${s1}`);
      expect(parsed).toEqual({ ok: true, range: r });
      expect(parseRangeHeader(formatRange(r))).toEqual({ ok: true, range: r });
    }),
    PARAMS,
  );
});

test('several ranges are multi-range; reversed, oversized or malformed ranges are bad-range', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(safe, safe), { minLength: 2, maxLength: 5 }), (pairs) => {
      const header = `bytes=${pairs.map(([a, b]) => `${Math.min(a, b)}-${Math.max(a, b)}`).join(', ')}`;
      expect(parseRangeHeader(header)).toEqual({ ok: false, reason: 'multi-range' });
    }),
    PARAMS,
  );
  fc.assert(
    fc.property(fc.nat(), fc.integer({ min: 1, max: 1000 }), (a, d) => {
      expect(parseRangeHeader(`bytes=${a + d}-${a}`)).toEqual({ ok: false, reason: 'bad-range' });
    }),
    PARAMS,
  );
  for (const bad of [
    'bytes=9007199254740992-',
    'bytes=-99999999999999999',
    'bytes=1-2-3',
    'bytes=-',
    'bytes 1-2',
    'items=1-2',
    'bytes=0x10-',
    'bytes=1.5-2',
    'bytes=+1-2',
  ])
    expect(parseRangeHeader(bad)).toEqual({ ok: false, reason: 'bad-range' });
});

test('any text: no throw, and what is accepted serves a range inside any object', () => {
  const header = fc.oneof(
    fc.string({ maxLength: 80 }),
    fc
      .tuple(
        ws,
        unit,
        fc.string({ maxLength: 30, unit: fc.constantFrom('0', '1', '9', '-', ',', ' ', '=', '\t', 'x') }),
      )
      .map(([s, u, rest]) => `${s}${u}=${rest}`),
  );
  fc.assert(
    fc.property(header, fc.oneof(fc.nat(), fc.constantFrom(0, 1, Number.MAX_SAFE_INTEGER)), (value, total) => {
      const parsed = parseRangeHeader(value);
      if (!parsed.ok) return;
      const served = resolveRange(parsed.range, total);
      if (served === null) return;
      expect(served.start).toBeGreaterThanOrEqual(0);
      expect(served.end).toBeGreaterThanOrEqual(served.start);
      expect(served.end).toBeLessThan(total);
    }),
    PARAMS,
  );
});
