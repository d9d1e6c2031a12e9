import type { ByteRange, ProxyInfo, StagedAnswer } from '@mutp/shared';
import { failedStage } from '@mutp/shared';
import { PrefetchClient, RangePrefetch } from '../src/range-prefetch';

const proxy = (id: string) => ({ proxyId: id, name: `edge-${id}` }) as unknown as ProxyInfo;

/** The two calls RangePrefetch makes of MutpClient, recorded; answers as the proxies would give them. */
function recordingClient(sets: ProxyInfo[][] | Error) {
  const chosen: number[] = [];
  const hints: { at: string[]; range?: ByteRange; mode?: string }[] = [];
  const client: PrefetchClient = {
    chooseProxies: (count) => {
      chosen.push(count);
      if (sets instanceof Error) return Promise.reject(sets);
      return Promise.resolve(sets.shift() ?? []);
    },
    stage: (_url, proxies, o) => {
      hints.push({ at: proxies.map((p) => p.proxyId), ...o });
      const answers: StagedAnswer[] = proxies.map((p, i) =>
        i === 0
          ? { ...failedStage('r', p.proxyId, 'x'), status: 'staged', error: undefined }
          : failedStage('r', p.proxyId, 'busy'),
      );
      return Promise.resolve(answers);
    },
  };
  return { client, chosen, hints };
}

const settle = () => new Promise((r) => setImmediate(r));

test('the set is chosen once; each range is hinted once at it, in the download mode; answers are counted', async () => {
  const r = recordingClient([[proxy('a'), proxy('b')]]);
  const prefetch = new RangePrefetch(r.client, 'http://o/x', 'rlnc', 2);
  expect((await prefetch.proxySet())?.map((p) => p.proxyId)).toEqual(['a', 'b']);
  prefetch.ahead([
    { start: 1000, length: 1000 },
    { start: 2000, length: 1000 },
  ]);
  prefetch.ahead([
    { start: 2000, length: 1000 },
    { start: 3000, length: 500 },
  ]);
  await settle();
  expect(r.chosen).toEqual([2]);
  expect(r.hints.map((h) => [h.at, h.range?.start, h.mode])).toEqual([
    [['a', 'b'], 1000, 'rlnc'],
    [['a', 'b'], 2000, 'rlnc'],
    [['a', 'b'], 3000, 'rlnc'],
  ]);
  expect(prefetch.stats).toEqual({ hinted: 3, staged: 3, failed: 3 });
});

test('after forget() (a failed range) a new set is chosen and ranges are hinted there again', async () => {
  const r = recordingClient([[proxy('a')], [proxy('c')]]);
  const prefetch = new RangePrefetch(r.client, 'http://o/x', 'fountain', 1);
  prefetch.ahead([{ start: 10, length: 10 }]);
  await settle();
  prefetch.forget();
  prefetch.ahead([{ start: 10, length: 10 }]);
  await settle();
  expect(r.hints.map((h) => [h.at, h.range?.start])).toEqual([
    [['a'], 10],
    [['c'], 10],
  ]);
});

test('no set from origo (an error, or none offered): downloads choose per range and nothing is hinted', async () => {
  const failing = recordingClient(new Error('no-proxies: origo has no proxy to offer'));
  const prefetch = new RangePrefetch(failing.client, 'http://o/x', 'rlnc', 2);
  expect(await prefetch.proxySet()).toBeUndefined();
  prefetch.ahead([{ start: 0, length: 1 }]);
  await settle();
  expect(failing.hints).toEqual([]);

  const empty = recordingClient([[]]);
  expect(await new RangePrefetch(empty.client, 'http://o/x', 'rlnc', 2).proxySet()).toBeUndefined();
});

test('an aborted download hints nothing more', async () => {
  const r = recordingClient([[proxy('a')]]);
  const abort = new AbortController();
  const prefetch = new RangePrefetch(r.client, 'http://o/x', 'rlnc', 1, abort.signal);
  abort.abort();
  prefetch.ahead([{ start: 0, length: 1 }]);
  await settle();
  expect(r.hints).toEqual([]);
});
