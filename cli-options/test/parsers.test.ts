/** The shared value parsers: a value out of range names the bound it missed, not "not an integer". */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { applyConfigFile, byteCount, integer } from '../src';

/** The message `parse(text)` throws (an InvalidArgumentError), or undefined when it accepts it. */
function messageOf(parse: (text: string) => number, text: string): string | undefined {
  try {
    parse(text);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidArgumentError);
    return (err as Error).message;
  }
}

describe('integer', () => {
  test('accepts integers in range, with surrounding blanks and a sign', () => {
    const parse = integer(0, 65535);
    expect(parse('0')).toBe(0);
    expect(parse(' 8700 ')).toBe(8700);
    expect(parse('+80')).toBe(80);
    expect(Object.is(parse('-0'), 0)).toBe(true);
    expect(parse('65535')).toBe(65535);
  });

  test('a negative value must be non-negative (min 0) or positive (min 1), not "not an integer"', () => {
    expect(messageOf(integer(0, 100_000_000), '-3')).toBe('must be non-negative (0..100000000)');
    expect(messageOf(integer(0), '-3')).toBe('must be non-negative');
    expect(messageOf(integer(1, 10_000), '-3')).toBe('must be positive (1..10000)');
    expect(messageOf(integer(1), '0')).toBe('must be positive');
    expect(messageOf(integer(1), '-1')).toBe('must be positive');
  });

  test('other bounds are named with the range', () => {
    expect(messageOf(integer(576, 9000), '100')).toBe('must be at least 576 (576..9000)');
    expect(messageOf(integer(576, 9000), '9001')).toBe('must be at most 9000 (576..9000)');
    expect(messageOf(integer(100), '-5')).toBe('must be at least 100');
    expect(messageOf(integer(0, 65535), '99999999999999999999')).toBe('must be at most 65535 (0..65535)');
  });

  test('only text that is no integer is called so, with what is expected', () => {
    expect(messageOf(integer(0, 65535), '1.5')).toBe('"1.5" is not an integer; it must be non-negative (0..65535)');
    expect(messageOf(integer(1), 'ten')).toBe('"ten" is not an integer; it must be positive');
    expect(messageOf(integer(1), '')).toBe('"" is not an integer; it must be positive');
    expect(messageOf(integer(1), '- 3')).toBe('"- 3" is not an integer; it must be positive');
  });

  test('bounds that are no range are a programming error', () => {
    expect(() => integer(5, 1)).toThrow(RangeError);
    expect(() => integer(0.5)).toThrow(RangeError);
  });
});

describe('byteCount', () => {
  test('reads binary units, KB as KiB', () => {
    const parse = byteCount();
    expect(parse('268435456')).toBe(268435456);
    expect(parse('256MiB')).toBe(256 * 1024 ** 2);
    expect(parse('256 mb')).toBe(256 * 1024 ** 2);
    expect(parse('4k')).toBe(4096);
    expect(parse('1G')).toBe(1024 ** 3);
    expect(parse('10b')).toBe(10);
  });

  test('a negative count must be non-negative; a huge one names the upper bound', () => {
    expect(messageOf(byteCount(), '-3')).toBe('must be non-negative');
    expect(messageOf(byteCount(), '-3MiB')).toBe('must be non-negative');
    expect(messageOf(byteCount(1, 1024), '0')).toBe('must be positive (1..1024)');
    expect(messageOf(byteCount(1, 1024), '2k')).toBe('must be at most 1024 (1..1024)');
    expect(messageOf(byteCount(), '99999999G')).toBe(`must be at most ${Number.MAX_SAFE_INTEGER}`);
  });

  test('text that is no byte count is called so', () => {
    expect(messageOf(byteCount(), '1.5MiB')).toBe('"1.5MiB" is not a byte count (e.g. 268435456, 256MiB)');
    expect(messageOf(byteCount(), '3 parsecs')).toBe('"3 parsecs" is not a byte count (e.g. 268435456, 256MiB)');
  });
});

describe('through commander', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'cli-options-parsers-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function command(): Command {
    return new Command()
      .exitOverride()
      .configureOutput({ writeErr: () => undefined, writeOut: () => undefined })
      .addOption(new Option('--config <file>'))
      .addOption(new Option('--upload-limit <KB/s>').argParser(integer(0, 100_000_000)).default(0));
  }

  /** The error commander reports for `argv`, or for the file `json` given by --config. */
  function errorOf(argv: string[], json?: unknown): string {
    const c = command();
    try {
      const file = join(dir, 'options.json');
      if (json !== undefined) writeFileSync(file, JSON.stringify(json));
      c.parse(['node', 'proxy', ...argv, ...(json !== undefined ? ['--config', file] : [])]);
      applyConfigFile(c, c.opts<{ config?: string }>().config);
    } catch (err) {
      expect(err).toBeInstanceOf(CommanderError);
      return (err as CommanderError).message;
    }
    throw new Error('no error');
  }

  test('--upload-limit -3 says it must be non-negative', () => {
    expect(errorOf(['--upload-limit', '-3'])).toBe(
      "error: option '--upload-limit <KB/s>' argument '-3' is invalid. must be non-negative (0..100000000)",
    );
  });

  test('"upload-limit": -3 in the config file says the same, naming the key', () => {
    const message = errorOf([], { 'upload-limit': -3 });
    expect(message).toMatch(/"upload-limit": must be non-negative \(0\.\.100000000\)$/);
  });

  test('a file value that is no integer is not quoted back', () => {
    const message = errorOf([], { 'upload-limit': 'hunter2' });
    expect(message).toMatch(/"upload-limit": the value is not an integer; it must be non-negative/);
    expect(message).not.toContain('hunter2');
  });
});
