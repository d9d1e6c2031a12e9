/**
 * `npm run fuzz` in-process: a few hundred inputs per parser from a fixed seed, on one worker
 * thread, so CI runs every fuzz target (a full run is `npm run fuzz`, 10^6 inputs).
 */
import { drawInput } from '../src/fuzz/inputs';
import { jsonSummary, runFuzz } from '../src/fuzz/runner';
import { TARGET_NAMES, targetByName } from '../src/fuzz/targets';

const SEED = 20261123;
const PER_PARSER = 150;

test('every parser survives its fuzz inputs, and the JSON summary has the documented shape', async () => {
  // The time bound only catches hangs here (a loaded CI machine must not make it fail).
  const report = await runFuzz({
    iterations: PER_PARSER * TARGET_NAMES.length,
    seed: SEED,
    workers: 1,
    timeoutMs: 30_000,
  });
  const failures = report.parsers.filter((p) => p.crashes > 0).map((p) => `${p.name}: ${JSON.stringify(p.firstCrash)}`);
  expect(failures).toEqual([]);
  expect(report.crashes).toBe(0);
  expect(report.inputs).toBe(PER_PARSER * TARGET_NAMES.length);
  expect(report.parsers.map((p) => [p.name, p.inputs])).toEqual(TARGET_NAMES.map((n) => [n, PER_PARSER]));

  const line = jsonSummary(report);
  expect(line).not.toContain('\n');
  const json = JSON.parse(line) as Record<string, unknown>;
  expect(Object.keys(json)).toEqual(['inputs', 'seed', 'crashes', 'parsers']);
  expect(json).toMatchObject({ inputs: report.inputs, seed: SEED, crashes: 0 });
  for (const p of json.parsers as Record<string, unknown>[])
    expect(Object.keys(p)).toEqual(['name', 'inputs', 'crashes']);
}, 240_000);

test('a seed replays the same inputs, and different parsers or seeds draw different ones', () => {
  for (const name of TARGET_NAMES) {
    const target = targetByName(name);
    const bytes = (seed: number, index: number) =>
      Buffer.from(target.bytes(drawInput(target, seed, index))).toString('hex');
    expect(bytes(SEED, 300)).toBe(bytes(SEED, 300));
    const distinct = new Set([0, 1, 2, 3, 4, 5, 6, 7].map((i) => bytes(SEED, i)));
    expect(distinct.size).toBeGreaterThan(4);
    expect([1, 2, 3].some((s) => bytes(SEED + s, 0) !== bytes(SEED, 0))).toBe(true);
  }
});

test('the runner counts exceptions and hangs, reports the first crashing input, and goes on after a hang', async () => {
  const targetsModule = require.resolve('./fixtures/faulty-fuzz-targets');
  const { TARGETS } = await import('./fixtures/faulty-fuzz-targets');
  const report = await runFuzz({ iterations: 3 * 300, seed: SEED, workers: 2, timeoutMs: 1000, targetsModule });
  const [throwing, hanging, fine] = report.parsers;
  expect(report.parsers.map((p) => p.name)).toEqual(['throws-on-7', 'hangs-on-99', 'fine']);

  // Exceptions: exactly the multiples of 7 among the inputs, the first one reported with its bytes.
  const inputs = (i: number) =>
    Array.from({ length: 300 }, (_, k) => drawInput(TARGETS[i] as never, SEED, k) as number);
  const multiples = inputs(0).filter((n) => n % 7 === 0);
  expect(throwing).toMatchObject({ inputs: 300, crashes: multiples.length });
  const first = inputs(0).findIndex((n) => n % 7 === 0);
  expect(throwing.firstCrash).toEqual({
    index: first,
    hex: Buffer.from(String(inputs(0)[first])).toString('hex'),
    error: expect.stringMatching(/^TypeError/),
  });

  // Hangs: each stops its worker; the inputs after it are still checked.
  const hangs = inputs(1).filter((n) => n % 100 === 99).length;
  expect(hangs).toBeGreaterThan(0);
  expect(hanging).toMatchObject({ inputs: 300, crashes: hangs });
  expect(hanging.firstCrash?.error).toMatch(/hang/);
  expect(fine).toMatchObject({ inputs: 300, crashes: 0 });
  expect(report.crashes).toBe(multiples.length + hangs);
}, 240_000);
