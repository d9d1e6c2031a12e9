/**
 * The parts of bench:origo that let it run at 50,000 sessions: the process plan under the
 * open-file limit, the connection ids that let a proxy in another generator process time the
 * relay, the merge of the workers' books, and the issue's scale targets in each row.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { mergeBook, bookToJson } from '../bench/book-wire';
import { benchProxyId, decodeExchangeId, encodeExchangeId, monotonicMs, proxyInstanceOf } from '../bench/exchange-id';
import { fileLimit, MAX_PEERS_PER_WORKER, OTHER_FILES, parseFileLimit, planProcesses } from '../bench/fd-limit';
import { RunBook } from '../bench/peers';
import { scaleProblems } from '../bench/row';

describe('open-file limit', () => {
  test('parses the "Max open files" line of /proc/<pid>/limits', () => {
    const limits = [
      'Limit                     Soft Limit           Hard Limit           Units     ',
      'Max processes             94014                94014                processes ',
      'Max open files            20000                65536                files     ',
    ].join('\n');
    expect(parseFileLimit(limits)).toEqual({ soft: 20000, hard: 65536 });
    expect(parseFileLimit('Max open files            unlimited            unlimited            files')).toEqual({
      soft: Infinity,
      hard: Infinity,
    });
    expect(parseFileLimit('Max processes 1 1 processes')).toBeUndefined();
  });

  test('raises its own soft limit up to the hard one, and says why when it cannot go further', () => {
    // A child started with a low soft limit (prlimit(1)), as a shell with `ulimit -Sn 1000` would.
    const script =
      "const f = require('./origo/bench/fd-limit.ts');" +
      'console.log(JSON.stringify({ raised: f.raiseFileLimit(1500), after: f.fileLimit(), over: f.raiseFileLimit(1e7) }));';
    const out = spawnSync('prlimit', ['--nofile=1000:2000', process.execPath, '--import', 'tsx', '-e', script], {
      cwd: join(__dirname, '..', '..'),
      encoding: 'utf8',
    });
    expect({ status: out.status, stderr: out.stderr }).toEqual({ status: 0, stderr: '' });
    const result = JSON.parse(out.stdout) as Record<string, { soft: number; hard?: number; problem?: string }>;
    expect(result.raised).toEqual({ soft: 2000 });
    expect(result.after).toEqual({ soft: 2000, hard: 2000 });
    // Past the hard limit only with CAP_SYS_RESOURCE: either it rose, or the reason is given.
    if (result.over.soft < 1e7) expect(result.over.problem).toMatch(/open-file limit 2000 < 10000000 needed/);
  });

  test('reads this process limit', () => {
    const own = fileLimit();
    expect(own.soft).toBeGreaterThan(0);
    expect(own.hard).toBeGreaterThanOrEqual(own.soft);
  });
});

describe('process plan', () => {
  test('splits the generator so that no worker holds more than its share', () => {
    const plan = planProcesses(50_000, 5000, 1, 100_000);
    expect(plan.workers).toBe(Math.ceil(55_000 / MAX_PEERS_PER_WORKER));
    expect(plan.problem).toBeUndefined();
    // The one origo instance holds every socket: the limit to raise to.
    expect(plan.filesNeeded).toBe(55_000 + OTHER_FILES);
  });

  test('a lower limit means more, smaller workers', () => {
    const plan = planProcesses(30_000, 3000, 2, 20_000);
    expect(plan.workers).toBe(Math.ceil(33_000 / MAX_PEERS_PER_WORKER));
    expect(planProcesses(30_000, 3000, 2, 6000).workers).toBe(Math.ceil(33_000 / 5000));
    expect(plan.problem).toBeUndefined();
  });

  test('an origo instance that cannot hold its share under the limit is named', () => {
    const plan = planProcesses(50_000, 5000, 1, 20_000);
    expect(plan.problem).toMatch(/each origo instance holds 55000 sockets .* limit is 20000/);
    expect(planProcesses(50_000, 5000, 4, 20_000).problem).toBeUndefined();
  });

  test('workers asked for are kept, and too few of them is named', () => {
    expect(planProcesses(100, 10, 1, 20_000, 3).workers).toBe(3);
    expect(planProcesses(30_000, 0, 2, 20_000, 1).problem).toMatch(/each of 1 generator processes holds 30000/);
  });
});

describe('exchange ids', () => {
  test('carry the send time, the window and the client instance within the schema', () => {
    const stamp = { client: 99_999, sequence: 123_456, measured: true, clientInstance: 1, sentAtMs: monotonicMs() };
    const id = encodeExchangeId(stamp);
    expect(id).toMatch(/^[A-Za-z0-9_.:-]{1,64}$/);
    const back = decodeExchangeId(id)!;
    expect({ ...back, sentAtMs: undefined }).toEqual({ ...stamp, sentAtMs: undefined });
    expect(Math.abs(back.sentAtMs - stamp.sentAtMs)).toBeLessThanOrEqual(0.001);
    expect(decodeExchangeId(encodeExchangeId({ ...stamp, measured: false }))!.measured).toBe(false);
    expect(decodeExchangeId('b1-2')).toBeUndefined();
  });

  test('proxy ids name their instance', () => {
    expect(proxyInstanceOf(benchProxyId(7), 2)).toBe(1);
    expect(proxyInstanceOf(benchProxyId(7), 1)).toBe(0);
    expect(proxyInstanceOf('p-other', 2)).toBeUndefined();
  });
});

test("the workers' books add up in the parent's", () => {
  const parts = [new RunBook(), new RunBook()];
  parts[0].oneWay.same.push(1);
  parts[1].oneWay.same.push(3);
  parts[1].oneWay.cross.push(5);
  parts[0].offers.measured = 2;
  parts[1].offers.measured = 3;
  parts[0].failures.errors.add('client:busy');
  parts[1].failures.errors.add('client:busy', 2);
  parts[1].failures.missingAnswers = 4;
  parts[0].heartbeatsMeasured = 10;
  const merged = new RunBook();
  // Through JSON, as over the IPC channel.
  for (const part of parts) mergeBook(merged, JSON.parse(JSON.stringify(bookToJson(part))));
  expect(merged.oneWay.same.summary()).toMatchObject({ count: 2, maxMs: 3 });
  expect(merged.oneWay.cross.count).toBe(1);
  expect(merged.offers.measured).toBe(5);
  expect(merged.failures.errors.toJSON()).toEqual({ 'client:busy': 3 });
  expect(merged.failures.missingAnswers).toBe(4);
  expect(merged.heartbeatsMeasured).toBe(10);
});

test("a row names each of the issue's scale targets it misses", () => {
  const ok = { relayP99Ms: 10, relayCrossP99Ms: 20, cpuCores: [0.5], rssBytesPerInstance: [2 ** 30] };
  expect(scaleProblems(ok)).toEqual([]);
  expect(scaleProblems({ ...ok, relayCrossP99Ms: null })).toEqual([]);
  const bad = scaleProblems({
    relayP99Ms: 50,
    relayCrossP99Ms: 80,
    cpuCores: [0.2, 1.1],
    rssBytesPerInstance: [2 ** 31],
  });
  expect(bad).toEqual([
    'relay p99 50 ms >= 50 ms',
    'cross-instance relay p99 80 ms >= 80 ms',
    'origo #1 used 1.1 cores',
    'origo #0 RSS 2.00 GiB >= 2 GiB',
  ]);
});
