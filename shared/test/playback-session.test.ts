/**
 * PlaybackSession, one call per segment, against a scripted client and a clock the test moves:
 * the set chosen once and every download through it, hints for what comes next, the handoff
 * settled before the next segment or in the background, tries and their limits.
 */
import { ClientError, PlaybackSession } from '../src/client';
import type { Clock, GetOptions, GetResult, PlaybackClient, PlaybackOptions } from '../src/client';
import type { ProxyInfo } from '../src';
import { downloadedFrom, stagedBy } from './helpers/scripted-client';

const proxy = (id: string): ProxyInfo => ({ proxyId: id, name: id, httpUrl: `http://${id}.test/`, capacityBps: 1e6 });
const SET = [proxy('p1'), proxy('p2')];
const SPARE = proxy('p3');

const flush = () => new Promise((r) => setImmediate(r));
const list = (n: number) => Array.from({ length: n }, (_, i) => ({ url: `http://o.test/${i}` }));

/** A clock whose time and timers move only when the test says. */
function manualClock() {
  let t = 0;
  const timers: { at: number; callback: () => void }[] = [];
  const clock: Clock = {
    now: () => t,
    setTimer: (ms, callback) => {
      const timer = { at: t + ms, callback };
      timers.push(timer);
      return () => timers.splice(timers.indexOf(timer), 1);
    },
  };
  const advance = (ms: number) => {
    t += ms;
    for (const timer of timers.filter((x) => x.at <= t)) {
      timers.splice(timers.indexOf(timer), 1);
      timer.callback();
    }
  };
  return { clock, advance, pendingTimers: () => timers.length };
}

/**
 * Downloads answer at once with every proxy asked active, unless `hang` holds them (they end
 * when their signal aborts) or `failures` says how many times a URL fails first (after decoding
 * half of its 10 bytes); `lost` names a proxy whose source fails in a URL's download. Hints are answered "staged" by every proxy named.
 */
function scriptedClient(o: { failures?: Record<string, number>; lost?: Record<string, string>; hang?: boolean } = {}) {
  const failures = { ...o.failures };
  const calls = {
    choose: [] as { exclude?: string[]; origoTimeoutMs?: number }[],
    stages: [] as { url: string; proxies: string[]; range?: unknown }[],
    gets: [] as { url: string; options: GetOptions }[],
  };
  let leaving: string[] = [];
  let listener: ((proxyId: string) => void) | undefined;
  let refuse: Error | undefined;
  /** Called as a download starts (a proxy may say it is leaving then). */
  let during: ((url: string) => void) | undefined;
  const client: PlaybackClient = {
    async chooseProxies(_count, _mode, c) {
      calls.choose.push({
        ...(c?.exclude ? { exclude: c.exclude } : {}),
        ...(c?.origoTimeoutMs !== undefined ? { origoTimeoutMs: c.origoTimeoutMs } : {}),
      });
      if (refuse) throw refuse;
      return c?.exclude ? [SPARE] : SET;
    },
    async stage(url, proxies, s) {
      calls.stages.push({ url, proxies: proxies.map((p) => p.proxyId), ...(s?.range ? { range: s.range } : {}) });
      return stagedBy(proxies);
    },
    leavingProxies: () => leaving,
    onProxyLeaving: (l) => {
      listener = l;
      return () => (listener = undefined);
    },
    get(url, options) {
      calls.gets.push({ url, options });
      during?.(url);
      return new Promise<GetResult>((resolve, reject) => {
        options.signal?.addEventListener('abort', () => reject(new ClientError('cancelled', 'aborted')));
        if (o.hang) return;
        if ((failures[url] ?? 0) > 0) {
          failures[url]--;
          options.onProgress?.({ dof: 5, totalDof: 10, bytes: 10, liveSources: 1, sources: 2 });
          reject(new ClientError('download-failed', 'stalled'));
          return;
        }
        const state = (id: string) => (o.lost?.[url] === id ? 'failed' : 'active');
        resolve(
          downloadedFrom(
            url,
            options.use!.map((p) => ({
              proxyId: p.proxyId,
              name: p.name,
              share: 0.5,
              state: state(p.proxyId),
            })) as GetResult['sources'],
          ),
        );
      });
    },
  };
  return {
    client,
    calls,
    /** `id` says it is going away: a notice at once, or (`notify` false) only for leavingProxies(). */
    leave: (id: string, notify = true) => {
      leaving = [...leaving, id];
      if (notify) listener?.(id);
    },
    whileDownloading: (url: string, f: () => void) => (during = (u) => u === url && f()),
    listening: () => listener !== undefined,
    refuse: (e: Error | undefined) => (refuse = e),
  };
}

function session(scripted: ReturnType<typeof scriptedClient>, o: Partial<PlaybackOptions> = {}) {
  const time = manualClock();
  const s = new PlaybackSession(scripted.client, time.clock, { mode: 'rlnc', proxies: 2, staging: true, ...o });
  return { session: s, ...time };
}

test('one call per segment: the set is chosen once, every download goes through it, what comes next is staged there', async () => {
  const scripted = scriptedClient();
  const { session: playback } = session(scripted);
  const segments = list(3);
  const fetched = [];
  for (const [i, s] of segments.entries()) {
    fetched.push(await playback.fetch(s, { upcoming: segments.slice(i + 1) }));
    await flush(); // the hints' answers
  }
  expect(scripted.calls.choose).toEqual([{}]);
  expect(scripted.calls.gets.map((g) => g.options.use)).toEqual([SET, SET, SET]);
  expect(scripted.calls.gets.map((g) => g.options.proxies)).toEqual([2, 2, 2]);
  expect(scripted.calls.stages.map((s) => s.url)).toEqual([segments[1].url, segments[2].url]);
  for (const stage of scripted.calls.stages) expect(stage.proxies).toEqual(['p1', 'p2']);
  // The first was fetched on demand; the others had been staged when their downloads began.
  expect(fetched.map((f) => f.staged)).toEqual([false, true, true]);
  expect(fetched.map((f) => new TextDecoder().decode(f.result.object))).toEqual(segments.map((s) => s.url));
  expect(playback.current()).toEqual(SET);
  expect(playback.stats()).toMatchObject({ ordersSent: 2, hintsStaged: 4, wasted: 0, handoffs: 0 });
});

test('a ranged segment is downloaded and its successors staged as the ranges named', async () => {
  const scripted = scriptedClient();
  const { session: playback } = session(scripted);
  const url = 'http://o.test/all.ts';
  await playback.fetch(
    { url, range: { start: 0, length: 100 } },
    { upcoming: [{ url, range: { start: 100, length: 100 } }] },
  );
  expect(scripted.calls.gets[0].options.range).toEqual({ start: 0, length: 100 });
  expect(scripted.calls.stages).toEqual([{ url, proxies: ['p1', 'p2'], range: { start: 100, length: 100 } }]);
});

test("a caller's limits reach origo (the set's choice included) and the proxy connections", async () => {
  const scripted = scriptedClient();
  const { session: playback } = session(scripted);
  await playback.fetch(list(1)[0], { origoTimeoutMs: 900, connectTimeoutMs: 700 });
  expect(scripted.calls.choose).toEqual([{ origoTimeoutMs: 900 }]);
  expect(scripted.calls.gets[0].options).toMatchObject({ origoTimeoutMs: 900, connectTimeoutMs: 700 });
});

test('without staging: the same set for every segment, no hint', async () => {
  const scripted = scriptedClient();
  const { session: playback } = session(scripted, { staging: false });
  const segments = list(3);
  for (const [i, s] of segments.entries()) await playback.fetch(s, { upcoming: segments.slice(i + 1) });
  expect(scripted.calls.stages).toEqual([]);
  expect(scripted.calls.gets.map((g) => g.options.use)).toEqual([SET, SET, SET]);
});

test("a failed choice of the set is the fetch's failure (no download); the next fetch asks origo again", async () => {
  const scripted = scriptedClient();
  const { session: playback } = session(scripted);
  scripted.refuse(new ClientError('origo-unreachable', 'origo handshake timed out'));
  await expect(playback.fetch(list(1)[0])).rejects.toThrow(/handshake/);
  expect(scripted.calls.gets).toEqual([]);
  scripted.refuse(undefined);
  await playback.fetch(list(1)[0]);
  expect(scripted.calls.choose).toHaveLength(2);
  expect(scripted.calls.gets).toHaveLength(1);
});

describe('handoff', () => {
  test("'before-next' (the default): settled as the next segment is asked for, which is staged at the newcomer before its download", async () => {
    const scripted = scriptedClient();
    const { session: playback } = session(scripted);
    const segments = list(3);
    await playback.fetch(segments[0], { upcoming: segments.slice(1) });
    scripted.whileDownloading(segments[1].url, () => scripted.leave('p2'));
    await playback.fetch(segments[1]);
    await flush();
    // Told mid-segment (the leaving notice), the handoff began at once: segment 2 is staged at p3.
    expect(scripted.calls.stages.find((s) => s.proxies.includes('p3'))).toEqual({
      url: segments[2].url,
      proxies: ['p3'],
    });
    await playback.fetch(segments[2]);
    expect(scripted.calls.gets.map((g) => g.options.use!.map((p) => p.proxyId))).toEqual([
      ['p1', 'p2'],
      ['p1', 'p2'],
      ['p1', 'p3'],
    ]);
    expect(playback.stats()).toMatchObject({ handoffs: 1, goingAwayReplaced: 1 });
  });

  test("'before-next': a proxy lost in a segment is replaced only when the next one is asked for", async () => {
    const segments = list(2);
    const scripted = scriptedClient({ lost: { [segments[0].url]: 'p2' } });
    const { session: playback } = session(scripted);
    await playback.fetch(segments[0], { upcoming: segments.slice(1) });
    await flush();
    expect(scripted.calls.choose).toEqual([{}]); // nothing yet: the series may end here
    await playback.fetch(segments[1]);
    expect(scripted.calls.choose).toEqual([{}, { exclude: ['p1', 'p2'] }]);
    expect(scripted.calls.gets[1].options.use!.map((p) => p.proxyId)).toEqual(['p1', 'p3']);
  });

  test("'background': settled right after the download, without a next call", async () => {
    const scripted = scriptedClient();
    const { session: playback } = session(scripted, { handoff: 'background' });
    const segments = list(3);
    // Known when the download ends, without a notice: only the handoff after it sees it.
    scripted.whileDownloading(segments[0].url, () => scripted.leave('p2', false));
    await playback.fetch(segments[0], { upcoming: segments.slice(1), track: 'v' });
    expect(playback.current()!.map((p) => p.proxyId)).toEqual(['p1', 'p2']);
    await flush();
    expect(scripted.calls.choose).toEqual([{}, { exclude: ['p1', 'p2'] }]);
    expect(scripted.calls.stages.find((s) => s.proxies.includes('p3'))).toEqual({
      url: segments[1].url,
      proxies: ['p3'],
    });
    expect(playback.current()!.map((p) => p.proxyId)).toEqual(['p1', 'p3']);
  });

  test('close: no more hints, and the leaving notices are unsubscribed', async () => {
    const scripted = scriptedClient();
    const { session: playback } = session(scripted);
    const segments = list(3);
    await playback.fetch(segments[0], { upcoming: segments.slice(1) });
    await flush();
    expect(scripted.listening()).toBe(true);
    const hints = scripted.calls.stages.length;
    playback.close();
    expect(scripted.listening()).toBe(false);
    await playback.fetch(segments[1]);
    await flush();
    expect(scripted.calls.stages).toHaveLength(hints);
  });
});

describe('tries', () => {
  test('a failed download is tried again within `attempts`; what the failed tries decoded is counted lost', async () => {
    const segments = list(2);
    const scripted = scriptedClient({ failures: { [segments[0].url]: 2 } });
    const { session: playback } = session(scripted);
    const events: string[] = [];
    const fetched = await playback.fetch(segments[0], {
      upcoming: segments.slice(1),
      attempts: 3,
      onAttempt: () => events.push('try'),
      onRetry: (e) => events.push(`retry: ${(e as Error).message}`),
    });
    expect(events).toEqual(['try', 'retry: download-failed: stalled', 'try', 'retry: download-failed: stalled', 'try']);
    expect(fetched).toMatchObject({ retries: 2, lostBytes: 10 });
    // Tries of one segment are one fetch for staging: its hints went out once.
    expect(scripted.calls.gets).toHaveLength(3);
    expect(scripted.calls.stages.map((s) => s.url)).toEqual([segments[1].url]);
  });

  test("the last failure is the fetch's, and no download follows", async () => {
    const segments = list(1);
    const scripted = scriptedClient({ failures: { [segments[0].url]: 5 } });
    const { session: playback } = session(scripted);
    await expect(playback.fetch(segments[0], { attempts: 2 })).rejects.toThrow(/stalled/);
    expect(scripted.calls.gets).toHaveLength(2);
  });

  test('a try past `attemptTimeoutMs` is given up and made again; its timer goes with it', async () => {
    const scripted = scriptedClient({ hang: true });
    const { session: playback, advance, pendingTimers } = session(scripted);
    let retried = 0;
    const fetching = playback.fetch(list(1)[0], { attempts: 2, attemptTimeoutMs: 1000, onRetry: () => retried++ });
    const outcome = fetching.catch((e: Error) => e.message);
    await flush();
    expect(scripted.calls.gets).toHaveLength(1);
    advance(1000);
    await flush();
    expect(retried).toBe(1);
    expect(scripted.calls.gets).toHaveLength(2);
    advance(1000);
    expect(await outcome).toMatch(/aborted/);
    expect(pendingTimers()).toBe(0);
  });

  test("the caller's abort ends the download with no further try", async () => {
    const scripted = scriptedClient({ hang: true });
    const { session: playback } = session(scripted);
    const abort = new AbortController();
    const fetching = playback.fetch(list(1)[0], { signal: abort.signal, attempts: 3 });
    await flush();
    abort.abort();
    await expect(fetching).rejects.toThrow(/aborted/);
    expect(scripted.calls.gets).toHaveLength(1);
  });
});
