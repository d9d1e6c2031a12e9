/** HTTP Range header parsing (`extension/src/common/media.ts` parseRangeHeader, resolveRange). */
import fc from 'fast-check';
import { formatRange, parseRangeHeader, resolveRange } from '@mutp/extension/media';
import { FuzzTarget, invariant, mutatedText, utf8 } from '../target';

const space = fc.constantFrom('', ' ', '\t', '  ', ' \t ');
const digits = fc.oneof(
  fc.nat().map(String),
  fc.constantFrom('0', '00', '9007199254740991', '9007199254740992', '9999999999999999', '99999999999999999', ''),
  fc.bigInt({ min: 0n, max: 10n ** 20n }).map(String),
);
const unit = fc.constantFrom('bytes', 'BYTES', 'Bytes', 'byte', 'items', '');
const spec = fc
  .tuple(space, digits, space, fc.constantFrom('-', '', '--', '+'), space, digits, space)
  .map((p) => p.join(''));

/** Header values: well-formed and near-valid single and multiple ranges, and long whitespace runs. */
const header = fc.oneof(
  fc
    .tuple(space, unit, space, fc.constantFrom('=', '', '=='), fc.array(spec, { minLength: 0, maxLength: 4 }))
    .map(([s1, u, s2, eq, specs]) => `${s1}${u}${s2}${eq}${specs.join(',')}`),
  fc
    .tuple(
      fc.integer({ min: 0, max: 20_000 }),
      fc.constantFrom(' ', '\t', '0', ',', '-', ' 1'),
      fc.constantFrom('', 'x', '-', '1-'),
    )
    .map(([n, filler, tail]) => `bytes=${filler.repeat(n)}${tail}`),
  fc.string({ maxLength: 60 }),
);

export const rangeTarget: FuzzTarget<{ header: string; total: number }> = {
  name: 'range',
  about: 'HTTP Range headers (extension/src/common/media.ts parseRangeHeader, resolveRange)',
  inputs: fc.record({
    header: fc.oneof({ weight: 3, arbitrary: header }, { weight: 1, arbitrary: mutatedText(header) }),
    total: fc.oneof(fc.nat(), fc.constantFrom(0, 1, 2 ** 53 - 1)),
  }),
  check({ header: value, total }) {
    const parsed = parseRangeHeader(value);
    if (!parsed.ok) {
      invariant(parsed.reason === 'bad-range' || parsed.reason === 'multi-range', `unknown reason ${parsed.reason}`);
      return;
    }
    const r = parsed.range;
    const safe = (n: number | undefined) => n === undefined || (Number.isSafeInteger(n) && n >= 0);
    if (r.kind === 'suffix') invariant(safe(r.length), `suffix length ${r.length}`);
    else
      invariant(safe(r.start) && safe(r.end) && (r.end === undefined || r.end >= r.start), `range ${r.start}-${r.end}`);
    // What is accepted survives being written out and read back (the downloader formats it).
    const again = parseRangeHeader(formatRange(r));
    invariant(again.ok && JSON.stringify(again.range) === JSON.stringify(r), `${formatRange(r)} does not parse back`);
    const served = resolveRange(r, total);
    if (served) {
      invariant(
        served.start >= 0 && served.start <= served.end && served.end < total,
        `served ${served.start}-${served.end} of ${total}`,
      );
    }
  },
  bytes: ({ header: value, total }) => utf8(`${total}\n${value}`),
};
