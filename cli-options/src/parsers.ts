/**
 * Value parsers for commander's `argParser`, written once for the services: a value of the right
 * shape but out of range says which bound it missed (`--upload-limit -3`: "must be non-negative"),
 * rather than that it is not a number. Messages quote the text only when it is not a number at all;
 * `applyConfigFile` removes that quote again for values read from the file.
 */
import { InvalidArgumentError } from 'commander';

const SIGNED_DIGITS = /^\s*[+-]?\d+\s*$/;

/** "must be non-negative", "must be positive", "must be at least 576": the lower bound in words. */
function atLeast(min: number): string {
  if (min === 0) return 'must be non-negative';
  if (min === 1) return 'must be positive';
  return `must be at least ${min}`;
}

/** The whole range, appended to a missed bound when there is an upper one: " (0..65535)". */
function range(min: number, max: number): string {
  return max === Number.MAX_SAFE_INTEGER ? '' : ` (${min}..${max})`;
}

/**
 * An integer in `min..max` (both included). A negative or too small value is told the lower bound
 * ("must be non-negative (0..100000000)"), a too large one the upper ("must be at most 65535
 * (0..65535)"); only text that is no integer at all ("1.5", "ten") is called not an integer.
 */
export function integer(min: number, max = Number.MAX_SAFE_INTEGER): (text: string) => number {
  if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || min > max) {
    throw new RangeError(`integer(${min}, ${max}): not a range of safe integers`);
  }
  return (text: string): number => {
    if (!SIGNED_DIGITS.test(text)) {
      throw new InvalidArgumentError(`${JSON.stringify(text)} is not an integer; it ${atLeast(min)}${range(min, max)}`);
    }
    return within(Number(text) + 0, min, max); // + 0: "-0" is 0
  };
}

/** `value` when it is in `min..max`, else the bound it missed. */
function within(value: number, min: number, max: number): number {
  if (value < min) throw new InvalidArgumentError(`${atLeast(min)}${range(min, max)}`);
  if (value > max) throw new InvalidArgumentError(`must be at most ${max}${range(min, max)}`);
  return value;
}

const BYTE_COUNT = /^\s*([+-]?\d+)\s*(b|[kmg](?:i?b)?)?\s*$/i;
const BINARY_FACTOR: Record<string, number> = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/**
 * A byte count in `min..max`: an integer with an optional binary unit (K, KiB, M, MiB, G, GiB;
 * KB, MB and GB are read as KiB, MiB and GiB, as the proxy's flags have always taken them). Bounds
 * are told as `integer` tells them ("--cache-bytes -3": "must be non-negative").
 */
export function byteCount(min = 0, max = Number.MAX_SAFE_INTEGER): (text: string) => number {
  integer(min, max); // the same check of the bounds themselves
  return (text: string): number => {
    const m = BYTE_COUNT.exec(text);
    if (!m) throw new InvalidArgumentError(`${JSON.stringify(text)} is not a byte count (e.g. 268435456, 256MiB)`);
    const value = Number(m[1]) * BINARY_FACTOR[(m[2] ?? 'b')[0].toLowerCase()];
    return within(value + 0, min, max);
  };
}
