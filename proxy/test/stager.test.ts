/** Stateless staging: hints fetch into the cache through the usual policy, answer once each, and are capped. */
import type { StagedByProxy, StageHint, StageLayout } from '@mutp/shared';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { ServeError } from '../src/errors';
import { ProxyMetrics } from '../src/metrics';
import type { FetchResult } from '@mutp/origin-fetch';
import { ObjectCache } from '../src/object-cache';
import { ObjectSource } from '../src/object-source';
import { encoderPreparer, LayoutRefused } from '../src/stage-prepare';
import { HintLedger } from '../src/hint-ledger';
import { Stager, StagerOptions } from '../src/stager';
import { silentLogger, until } from './helpers';

/** A fetcher whose answers the test releases by hand, recording each fetch's abort signal. */
function manualFetcher() {
  const calls: { url: string; signal: AbortSignal }[] = [];
  const waiting = new Map<string, { resolve: (r: FetchResult) => void; reject: (e: Error) => void }>();
  return {
    calls,
    fetch(url: string, signal: AbortSignal): Promise<FetchResult> {
      calls.push({ url, signal });
      return new Promise((resolve, reject) => {
        waiting.set(url, { resolve, reject });
        signal.addEventListener('abort', () => reject(new ServeError('timeout', 'aborted')));
      });
    },
    answer(url: string, bytes: Uint8Array, cacheControl?: string) {
      waiting.get(url)?.resolve({ bytes, ...(cacheControl ? { cacheControl } : {}) });
      waiting.delete(url);
    },
    fail(url: string, error: Error) {
      waiting.get(url)?.reject(error);
      waiting.delete(url);
    },
  };
}

function setUp(overrides: Partial<StagerOptions> = {}, cacheBytes = 10_000) {
  const fetcher = manualFetcher();
  const cache = new ObjectCache({ maxBytes: cacheBytes, fetch: (url, control) => fetcher.fetch(url, control.signal) });
  const objects = new ObjectSource({ allowedOrigins: '*', allowPrivateOrigins: false }, cache);
  const answers: StagedByProxy[] = [];
  let time = 0;
  const metrics = new ProxyMetrics();
  const stager = new Stager({
    objects,
    send: (a) => answers.push(a),
    metrics,
    logger: silentLogger(),
    maxConcurrent: 3,
    maxPerClient: 2,
    timeoutMs: 60_000,
    clock: () => time,
    ...overrides,
  });
  return {
    fetcher,
    cache,
    answers,
    stager,
    metrics,
    advance: (ms: number) => (time += ms),
  };
}

const hint = (requestId: string, url: string, clientId = 'c-1', layout?: StageLayout): StageHint => ({
  type: 'stage',
  clientId,
  requestId,
  url,
  ...(layout ? { layout } : {}),
});

test('a hint fetches the object into the cache and answers staged with the origin time', async () => {
  const t = setUp();
  t.stager.handle(hint('s1', 'https://o.example/a'));
  await until(() => t.fetcher.calls.length === 1, 1000, 'the origin fetch');
  t.advance(120);
  t.fetcher.answer('https://o.example/a', new Uint8Array(1000));
  await until(() => t.answers.length === 1, 1000, 'the answer');
  expect(t.answers[0]).toEqual({
    type: 'staged',
    clientId: 'c-1',
    requestId: 's1',
    status: 'staged',
    originMs: 120,
    cached: false,
    bytes: 1000,
  });
  expect(t.cache.has('https://o.example/a')).toBe(true);

  // Staged again: answered from the cache, no second origin fetch.
  t.stager.handle(hint('s2', 'https://o.example/a', 'c-2'));
  await until(() => t.answers.length === 2, 1000, 'the second answer');
  expect(t.answers[1]).toMatchObject({ clientId: 'c-2', status: 'staged', cached: true, originMs: 0, bytes: 1000 });
  expect(t.fetcher.calls).toHaveLength(1);
  expect(t.stager.inFlight).toBe(0);
});

test('hints past the per-client and total caps are answered busy at once', async () => {
  const t = setUp();
  t.stager.handle(hint('s1', 'https://o.example/1'));
  t.stager.handle(hint('s2', 'https://o.example/2'));
  t.stager.handle(hint('s3', 'https://o.example/3')); // third for c-1: over maxPerClient 2
  t.stager.handle(hint('s4', 'https://o.example/4', 'c-2'));
  t.stager.handle(hint('s5', 'https://o.example/5', 'c-3')); // fourth in all: over maxConcurrent 3
  expect(t.answers.map((a) => [a.requestId, a.error])).toEqual([
    ['s3', 'busy'],
    ['s5', 'busy'],
  ]);
  t.fetcher.answer('https://o.example/1', new Uint8Array(10));
  await until(() => t.answers.length === 3, 1000, 'the first staged answer');
  // A slot is free again for c-1.
  t.stager.handle(hint('s6', 'https://o.example/6'));
  await until(() => t.fetcher.calls.length === 4, 1000, 'the next fetch');
  expect(t.answers).toHaveLength(3);
});

test('failures answer failed with the error kind; refused URLs never reach the origin', async () => {
  const t = setUp();
  t.stager.handle(hint('s1', 'https://o.example/missing'));
  await until(() => t.fetcher.calls.length === 1, 1000, 'the origin fetch');
  t.fetcher.fail('https://o.example/missing', new ServeError('not-found', 'origin answered 404'));
  t.stager.handle(hint('s2', 'http://127.0.0.1/admin'));
  await until(() => t.answers.length === 2, 1000, 'both answers');
  expect(t.answers.map((a) => [a.requestId, a.status, a.error]).sort()).toEqual([
    ['s1', 'failed', 'not-found'],
    ['s2', 'failed', 'refused'],
  ]);
  expect(t.fetcher.calls.map((c) => c.url)).toEqual(['https://o.example/missing']);
  expect(await t.metrics.registry.getSingleMetricAsString('mutp_proxy_stage_hints_total')).toContain(
    'mutp_proxy_stage_hints_total{outcome="not-found"} 1',
  );
});

test('an object the cache will not keep is not staged', async () => {
  const t = setUp();
  t.stager.handle(hint('s1', 'https://o.example/private'));
  await until(() => t.fetcher.calls.length === 1, 1000, 'the origin fetch');
  t.fetcher.answer('https://o.example/private', new Uint8Array(10), 'no-store');
  await until(() => t.answers.length === 1, 1000, 'the answer');
  expect(t.answers[0]).toMatchObject({ status: 'failed', error: 'uncacheable', bytes: 10 });
});

test('a staging fetch is withdrawn after the timeout and when the proxy closes', async () => {
  const t = setUp({ timeoutMs: 50 });
  t.stager.handle(hint('s1', 'https://o.example/slow'));
  await until(() => t.answers.length === 1, 5000, 'the timeout answer');
  expect(t.answers[0]).toMatchObject({ status: 'failed', error: 'timeout' });
  expect(t.fetcher.calls[0].signal.aborted).toBe(true);

  const u = setUp();
  u.stager.handle(hint('s1', 'https://o.example/slow'));
  await until(() => u.fetcher.calls.length === 1, 1000, 'the origin fetch');
  u.stager.close();
  await until(() => u.answers.length === 1, 1000, 'the answer');
  expect(u.fetcher.calls[0].signal.aborted).toBe(true);
  u.stager.handle(hint('s2', 'https://o.example/later'));
  expect(u.answers[1]).toMatchObject({ requestId: 's2', error: 'closing' });
});

test('a draining proxy stages nothing', () => {
  const t = setUp({ draining: () => true });
  t.stager.handle(hint('s1', 'https://o.example/a'));
  expect(t.answers).toEqual([expect.objectContaining({ status: 'failed', error: 'draining' })]);
  expect(t.fetcher.calls).toEqual([]);
});

describe("a hint's layout", () => {
  let codecs: Awaited<ReturnType<typeof loadNodeCodecs>>;
  beforeAll(async () => {
    codecs = await loadNodeCodecs();
  });
  const object = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31) & 0xff);
  const FOUNTAIN: StageLayout = { mode: 'fountain', symbolSize: 1120, generationSize: 24 };

  test('prepares the staged object: its encoder is parked for the REQUEST before the answer', async () => {
    const t = setUp({ prepare: encoderPreparer(() => codecs, 64) }, 1 << 20);
    t.stager.handle(hint('s1', 'https://o.example/seg', 'c-1', FOUNTAIN));
    await until(() => t.fetcher.calls.length === 1, 1000, 'the origin fetch');
    t.fetcher.answer('https://o.example/seg', object(200_000));
    await until(() => t.answers.length === 1, 5000, 'the answer');
    expect(t.answers[0]).toMatchObject({ status: 'staged', bytes: 200_000, prepared: true });
    const cached = await t.cache.get('https://o.example/seg');
    // No transfer holds it: the one encoder alive is the prepared one, waiting among the idle ones.
    expect(cached.encoders.size).toBe(1);
    expect(await t.metrics.registry.getSingleMetricAsString('mutp_proxy_stage_prepared_total')).toContain(
      'mutp_proxy_stage_prepared_total{outcome="prepared"} 1',
    );
  });

  test('a layout a REQUEST would be refused for stages the object and prepares nothing', async () => {
    const t = setUp({ prepare: encoderPreparer(() => ({ rlnc: codecs.rlnc }), 64) }, 1 << 20);
    const refused: StageLayout[] = [
      FOUNTAIN, // no fountain codec on this proxy
      { mode: 'rlnc', symbolSize: 32, generationSize: 24 }, // below the proxy's smallest symbol
    ];
    for (const [i, layout] of refused.entries()) {
      const url = `https://o.example/r${i}`;
      t.stager.handle(hint(`s${i}`, url, `c-${i}`, layout));
      await until(() => t.fetcher.calls.length === i + 1, 1000, 'the origin fetch');
      t.fetcher.answer(url, object(10_000));
      await until(() => t.answers.length === i + 1, 5000, 'the answer');
      expect(t.answers[i]).toMatchObject({ status: 'staged', bytes: 10_000, prepared: false });
      expect((await t.cache.get(url)).encoders.size).toBe(0);
    }
    expect(await t.metrics.registry.getSingleMetricAsString('mutp_proxy_stage_prepared_total')).toContain(
      'mutp_proxy_stage_prepared_total{outcome="refused"} 2',
    );
    await expect(
      encoderPreparer(() => codecs, 64)(
        await t.cache.get('https://o.example/r0'),
        FOUNTAIN,
        new AbortController().signal,
      ),
    ).resolves.toBeUndefined();
    await expect(
      encoderPreparer(() => ({}), 64)(
        await t.cache.get('https://o.example/r0'),
        FOUNTAIN,
        new AbortController().signal,
      ),
    ).rejects.toBeInstanceOf(LayoutRefused);
  });

  test('without a layout nothing is prepared', async () => {
    const prepare = jest.fn(() => Promise.resolve());
    const t = setUp({ prepare }, 1 << 20);
    t.stager.handle(hint('s1', 'https://o.example/plain'));
    await until(() => t.fetcher.calls.length === 1, 1000, 'the origin fetch');
    t.fetcher.answer('https://o.example/plain', object(1000));
    await until(() => t.answers.length === 1, 1000, 'the answer');
    expect(t.answers[0]).toMatchObject({ status: 'staged' });
    expect(t.answers[0]).not.toHaveProperty('prepared');
    expect(prepare).not.toHaveBeenCalled();
  });
});

describe('what hints may cost the origin (issue 31, attack 4)', () => {
  const MiB = 1 << 20;

  test('HintLedger: origin bytes within a floor plus twice the completed downloads, decaying', () => {
    const ledger = new HintLedger({ floorBytes: 4 * MiB, ratio: 2, windowMs: 60_000, maxNetworks: 2 });
    expect(ledger.mayStage('n1', 0)).toBe(true);
    ledger.chargeOrigin('n1', 5 * MiB, 0);
    expect(ledger.mayStage('n1', 0)).toBe(false);
    // Downloads it completes earn it more.
    ledger.creditCompleted('n1', 1 * MiB, 0);
    expect(ledger.mayStage('n1', 0)).toBe(true);
    ledger.chargeOrigin('n1', 2 * MiB, 0);
    expect(ledger.mayStage('n1', 0)).toBe(false);
    // Forgotten with time: after a few windows the network is back under its floor.
    expect(ledger.mayStage('n1', 120_000)).toBe(true);
    // Another network is not touched by n1's spending; the least recent network is forgotten first.
    expect(ledger.mayStage('n2', 0)).toBe(true);
    ledger.chargeOrigin('n2', 1, 0);
    ledger.chargeOrigin('n3', 1, 0);
    expect(ledger.peek('n1', 120_000)).toBeUndefined();
  });

  test('cache-busting hints of one network stop at its floor; a network that downloads keeps staging', async () => {
    const ledger = new HintLedger({ floorBytes: 3000, ratio: 2, windowMs: 60_000, maxNetworks: 100 });
    const fetcher = manualFetcher();
    const cache = new ObjectCache({
      maxBytes: 100_000,
      fetch: (url, control) => fetcher.fetch(url, control.signal),
      onOriginBytes: (network, bytes) => network !== undefined && ledger.chargeOrigin(network, bytes, 0),
    });
    const objects = new ObjectSource({ allowedOrigins: '*', allowPrivateOrigins: false }, cache);
    const answers: StagedByProxy[] = [];
    const stager = new Stager({
      objects,
      send: (a) => answers.push(a),
      metrics: new ProxyMetrics(),
      logger: silentLogger(),
      maxConcurrent: 8,
      maxPerClient: 8,
      timeoutMs: 60_000,
      clock: () => 0,
      ledger,
    });
    const from = (network: string, i: number): StageHint => ({
      ...hint(`${network}-${i}`, `https://o.example/seg.ts?bust=${network}-${i}`, `id-${i}`),
      clientNetwork: network,
    });
    // Ten hints, one after the other, each a new URL of 1000 bytes, from ten free client ids.
    for (let i = 0; i < 10; i++) {
      stager.handle(from('198.51.100.0/24', i));
      const url = `https://o.example/seg.ts?bust=198.51.100.0/24-${i}`;
      if (fetcher.calls.some((c) => c.url === url)) fetcher.answer(url, new Uint8Array(1000));
      await until(() => answers.length === i + 1, 1000, `answer ${i}`);
    }
    // Up to the floor (3000 bytes) and one fetch past it; the rest refused before any fetch.
    expect(fetcher.calls).toHaveLength(4);
    expect(answers.filter((a) => a.error === 'over-budget')).toHaveLength(6);
    // A network whose clients completed downloads may stage more.
    ledger.creditCompleted('203.0.113.0/24', 10_000, 0);
    ledger.chargeOrigin('203.0.113.0/24', 10_000, 0);
    stager.handle(from('203.0.113.0/24', 0));
    await until(() => fetcher.calls.length === 5, 1000, 'the other network fetches');
  });
});

test('an object a hint fetched leaves the cache when nobody asks for it in time; one asked for stays (issue 31)', async () => {
  const t = setUp({ unrequestedHoldMs: 1500 });
  for (const name of ['asked', 'ignored']) {
    t.stager.handle(hint(name, `https://o.example/${name}`));
    await until(() => t.fetcher.calls.some((c) => c.url.endsWith(name)), 1000, `the fetch of ${name}`);
    t.fetcher.answer(`https://o.example/${name}`, new Uint8Array(1000));
    await until(() => t.answers.some((a) => a.requestId === name), 1000, `${name} staged`);
  }
  // A transfer asks for the first one within the hold time.
  await t.cache.get('https://o.example/asked');
  // Its hold ends first (staged first): once the other is dropped, both holds are over.
  await until(() => t.cache.stats().unrequestedDropped === 1, 5000, 'the unrequested object to be dropped');
  expect(t.cache.has('https://o.example/ignored')).toBe(false);
  expect(t.cache.has('https://o.example/asked')).toBe(true);
  t.stager.close();
});
