/**
 * downloadSeries' and SegmentStager's own logic against a scripted client (the network half is
 * e2e/test/cli.test.ts, `mutp playlist` against real proxies, and the extension's playback
 * tests): one proxy set for the whole series, hints to that set as the StagingManager orders
 * them, segments tried again after a failure, tracks followed apart.
 */
import { ClientError, downloadSeries, systemClock } from '../src/client';
import type { DownloadResult, GetOptions, GetResult, PlaybackClient, SpreadConfig } from '../src/client';
import { SegmentStager } from '../src/client/staging/stager';
import type { ProxyInfo } from '../src';
import { downloadedFrom, stagedBy } from './helpers/scripted-client';

const PROXIES: ProxyInfo[] = [
  { proxyId: 'p1', name: 'p1', httpUrl: 'http://p1.test/', capacityBps: 1e6 },
  { proxyId: 'p2', name: 'p2', httpUrl: 'http://p2.test/', capacityBps: 1e6 },
];

const SPARE: ProxyInfo = { proxyId: 'p3', name: 'p3', httpUrl: 'http://p3.test/', capacityBps: 1e6 };

/**
 * A client whose downloads succeed unless `failures` says how many times a URL fails first;
 * `lost` names a proxy whose source fails in that URL's download (its connection lost); `slow`
 * one that delivers 2 % of every 1 MB segment (the others share the rest).
 */
function scriptedClient(
  failures: Record<string, number> = {},
  lost: Record<string, string> = {},
  slow?: string,
  set: ProxyInfo[] = PROXIES,
) {
  const calls = {
    choose: [] as (string[] | undefined)[],
    stages: [] as { url: string; proxies: string[] }[],
    gets: [] as GetOptions[],
  };
  const client: PlaybackClient = {
    async chooseProxies(_count, _mode, o) {
      calls.choose.push(o?.exclude);
      return o?.exclude ? [SPARE] : set;
    },
    async stage(url, proxies) {
      calls.stages.push({ url, proxies: proxies.map((p) => p.proxyId) });
      return stagedBy(proxies);
    },
    async get(url: string, o: GetOptions): Promise<GetResult> {
      calls.gets.push(o);
      if ((failures[url] ?? 0) > 0) {
        failures[url]--;
        o.onProgress?.({ dof: 5, totalDof: 10, bytes: 10, liveSources: 1, sources: 2 });
        throw new ClientError('download-failed', 'stalled');
      }
      return downloadedFrom(
        url,
        o.use!.map((p, _i, set) => ({
          proxyId: p.proxyId,
          name: p.name,
          share:
            slow === undefined
              ? 0.5
              : p.proxyId === slow
                ? 0.02
                : set.some((q) => q.proxyId === slow)
                  ? 0.98 / (set.length - 1)
                  : 1 / set.length,
          state: lost[url] === p.proxyId ? ('failed' as const) : ('active' as const),
          received: 1,
          useful: 1,
          redundant: 0,
          beforeMeta: 0,
          afterComplete: 0,
          invalid: 0,
          malformed: 0,
          bytes: slow === undefined ? 1 : 1e6 / o.use!.length,
          rateBps: 1,
          polluter: false,
        })),
      );
    },
  };
  return { client, calls };
}

const FOUR: ProxyInfo[] = [
  ...PROXIES,
  { proxyId: 'q3', name: 'q3', httpUrl: 'http://q3.test/', capacityBps: 1e6 },
  { proxyId: 'q4', name: 'q4', httpUrl: 'http://q4.test/', capacityBps: 1e6 },
];

const segments = ['http://o.test/0', 'http://o.test/1', 'http://o.test/2', 'http://o.test/3'].map((url) => ({ url }));

test('one proxy set for the series; hints for upcoming segments go to it, never for the one being fetched', async () => {
  const { client, calls } = scriptedClient();
  const objects: string[] = [];
  const result = await downloadSeries(client, systemClock, segments, {
    mode: 'rlnc',
    proxies: 2,
    staging: true,
    onSegment: (_s, object) => objects.push(new TextDecoder().decode(object)),
  });
  expect(calls.choose).toEqual([undefined]);
  expect(objects).toEqual(segments.map((s) => s.url));
  for (const get of calls.gets) expect(get.use).toEqual(PROXIES);
  expect(calls.stages.map((s) => s.url)).not.toContain(segments[0].url);
  for (const s of calls.stages) expect(s.proxies).toEqual(['p1', 'p2']);
  expect(new Set(calls.stages.map((s) => s.url)).size).toBe(calls.stages.length);
  expect(result.staging.wasted).toBe(0);
  expect(result.staging.hintsStaged).toBe(result.staging.hintsAnswered);
  expect(result.segments.map((s) => s.retries)).toEqual([0, 0, 0, 0]);
});

test('without staging no hint is sent', async () => {
  const { client, calls } = scriptedClient();
  const result = await downloadSeries(client, systemClock, segments, { mode: 'rlnc', proxies: 2, staging: false });
  expect(calls.stages).toEqual([]);
  expect(result.segments.every((s) => !s.staged)).toBe(true);
});

test('a failed segment is tried again within `attempts`, and what the failed try had decoded is counted lost', async () => {
  const { client } = scriptedClient({ 'http://o.test/1': 2 });
  const retried: number[] = [];
  const result = await downloadSeries(client, systemClock, segments, {
    mode: 'rlnc',
    proxies: 2,
    staging: false,
    attempts: 3,
    onRetry: (_e, i) => retried.push(i),
  });
  expect(retried).toEqual([1, 1]);
  expect(result.segments[1]).toMatchObject({ retries: 2, lostBytes: 10 });

  const { client: failing } = scriptedClient({ 'http://o.test/2': 5 });
  await expect(
    downloadSeries(failing, systemClock, segments, { mode: 'rlnc', proxies: 2, staging: false, attempts: 3 }),
  ).rejects.toThrow(/stalled/);
});

/** p2 says it is going away (ERROR GoingAway: it drains) while segment 1 downloads, which it still serves. */
function drainingDuringSegment1() {
  const scripted = scriptedClient();
  const leaving: string[] = [];
  const get = scripted.client.get.bind(scripted.client);
  scripted.client.get = (url, o) => {
    if (url === 'http://o.test/1') leaving.push('p2');
    return get(url, o);
  };
  scripted.client.leavingProxies = () => leaving;
  return scripted;
}

test.each([
  ['lost in segment 1', () => scriptedClient({}, { 'http://o.test/1': 'p2' }), 0, 0],
  ['far below its share in segments 0 and 1 (degrading)', () => scriptedClient({}, {}, 'p2'), 1, 0],
  ['going away (draining) during segment 1', drainingDuringSegment1, 0, 1],
])(
  'handoff between segments: a proxy %s is replaced before segment 2, which is staged at the newcomer first',
  async (_trigger, scripted, slowReplaced, goingAwayReplaced) => {
    const { client, calls } = scripted();
    const result = await downloadSeries(client, systemClock, segments, { mode: 'rlnc', proxies: 2, staging: true });
    expect(result.handoffs).toBe(1);
    expect(result.staging.slowReplaced).toBe(slowReplaced);
    expect(result.staging.goingAwayReplaced).toBe(goingAwayReplaced);
    expect(calls.choose).toEqual([undefined, ['p1', 'p2']]);
    expect(calls.gets.map((g) => g.use!.map((p) => p.proxyId))).toEqual([
      ['p1', 'p2'],
      ['p1', 'p2'],
      ['p1', 'p3'],
      ['p1', 'p3'],
    ]);
    // Segment 2 went to p3 before its download started (after segment 1, before segment 2).
    const toNewcomer = calls.stages.findIndex((s) => s.proxies.includes('p3'));
    expect(calls.stages[toNewcomer]).toEqual({ url: 'http://o.test/2', proxies: ['p3'] });
    expect(result.proxies.map((p) => p.proxyId)).toEqual(['p1', 'p3']);
    expect(result.segments[2].sources).toEqual(['p1', 'p3']);
  },
);

test('told at once that a proxy is going away, the handoff begins mid-segment: the next segment is staged at the newcomer before this one ends', async () => {
  const scripted = drainingDuringSegment1();
  const { client, calls } = scripted;
  let listener: ((proxyId: string) => void) | undefined;
  client.onProxyLeaving = (l) => {
    listener = l;
    return () => (listener = undefined);
  };
  const get = client.get.bind(client);
  let stagedAtNewcomerBeforeEnd = false;
  client.get = async (url, o) => {
    const result = get(url, o); // marks p2 leaving for segment 1
    if (url === 'http://o.test/1') {
      listener?.('p2');
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      stagedAtNewcomerBeforeEnd = calls.stages.some((st) => st.url === 'http://o.test/2' && st.proxies.includes('p3'));
    }
    return result;
  };
  const result = await downloadSeries(client, systemClock, segments, { mode: 'rlnc', proxies: 2, staging: true });
  expect(stagedAtNewcomerBeforeEnd).toBe(true);
  expect(result.handoffs).toBe(1);
  expect(result.staging.goingAwayReplaced).toBe(1);
  // Segment 1 kept its sources; segment 2 on is from the new set; origo was asked once for a replacement.
  expect(calls.gets.map((g) => g.use!.map((p) => p.proxyId))).toEqual([
    ['p1', 'p2'],
    ['p1', 'p2'],
    ['p1', 'p3'],
    ['p1', 'p3'],
  ]);
  expect(calls.choose).toEqual([undefined, ['p1', 'p2']]);
  expect(listener).toBeUndefined(); // unsubscribed at the end
});

test('a proxy origo cannot replace is not asked about every segment: the asks back off (5 s, doubling)', async () => {
  const urls = Array.from({ length: 12 }, (_, i) => `http://o.test/r${i}`);
  const { client, calls } = scriptedClient({}, Object.fromEntries(urls.map((u) => [u, 'p2'])));
  const choose = client.chooseProxies.bind(client);
  const asked: number[] = [];
  client.chooseProxies = (count, mode, o) => {
    if (!o?.exclude) return choose(count, mode, o);
    asked.push(t);
    return Promise.resolve([]);
  };
  // Each download takes 2 s of this clock.
  let t = 0;
  const clock = { now: () => t, setTimer: systemClock.setTimer };
  const get = client.get.bind(client);
  client.get = (url, o) => {
    t += 2000;
    return get(url, o);
  };
  const result = await downloadSeries(
    client,
    clock,
    urls.map((url) => ({ url })),
    { mode: 'rlnc', proxies: 2, staging: false },
  );
  // Asked after segments 0 (t = 2 s), 3 (8 s: 5 s on) and 8 (18 s: 10 s on); never replaced.
  expect(asked).toEqual([2000, 8000, 18_000]);
  expect(calls.gets).toHaveLength(12);
  expect(result.handoffs).toBe(0);
  expect(result.proxies.map((p) => p.proxyId)).toEqual(['p1', 'p2']);
});

describe('SegmentStager (the loader side: segments as the player asks for them)', () => {
  const flush = () => new Promise((r) => setImmediate(r));
  const track = (name: string, n: number) =>
    Array.from({ length: n }, (_, i) => ({ url: `http://o.test/${name}/${i}` }));

  test('tracks are staged apart: interleaved audio and video requests do not count each other as skipped', async () => {
    const { client, calls } = scriptedClient();
    const stager = new SegmentStager(client, systemClock, { mode: 'rlnc', proxies: 2, staging: true });
    await stager.proxies();
    const video = track('v', 4);
    const audio = track('a', 4);
    for (let i = 0; i < 4; i++) {
      for (const [name, list] of [
        ['v', video],
        ['a', audio],
      ] as const) {
        stager.setUpcoming(list.slice(i), name);
        stager.fetchStarted(list[i], name);
        await flush();
        stager.fetchCompleted(list[i], name);
      }
    }
    const staged = calls.stages.map((s) => s.url);
    expect(staged).toContain('http://o.test/v/1');
    expect(staged).toContain('http://o.test/a/1');
    expect(stager.stats().wasted).toBe(0);
  });

  test('a seek leaves at most the staged-ahead segments as waste, and a dropped track counts its own', async () => {
    const { client } = scriptedClient();
    const stager = new SegmentStager(client, systemClock, { mode: 'rlnc', proxies: 2, staging: true, maxTracks: 1 });
    await stager.proxies();
    const list = track('v', 20);
    stager.setUpcoming(list, 'v');
    stager.fetchStarted(list[0], 'v');
    await flush();
    stager.fetchCompleted(list[0], 'v');
    // Only one ahead until fetch and staging times are measured: segment 1 is staged, then skipped.
    stager.setUpcoming(list.slice(10), 'v');
    expect(stager.stats().wasted).toBe(1);
    stager.fetchStarted(list[10], 'v');
    await flush();
    stager.setUpcoming(track('v2', 5), 'v2'); // a stream switch: track v is dropped with list[11] staged
    expect(stager.stats().wasted).toBe(2);
  });

  test('a failed choice of proxies is tried again on the next call; hints wait for a set', async () => {
    const { client, calls } = scriptedClient();
    let refuse = true;
    const choose = client.chooseProxies.bind(client);
    client.chooseProxies = (count, mode, o) =>
      refuse ? Promise.reject(new ClientError('no-proxies', 'none')) : choose(count, mode, o);
    const stager = new SegmentStager(client, systemClock, { mode: 'rlnc', proxies: 2, staging: true });
    const list = track('v', 3);
    stager.setUpcoming(list);
    await expect(stager.proxies()).rejects.toThrow(/none/);
    stager.fetchStarted(list[0]);
    expect(calls.stages).toEqual([]);
    refuse = false;
    await expect(stager.proxies()).resolves.toBe(PROXIES);
    expect(stager.current()).toBe(PROXIES);
  });
});

describe('spread: each segment staged at and fetched from part of the set', () => {
  const many = (n: number) => Array.from({ length: n }, (_, i) => ({ url: `http://o.test/s${i}` }));
  const twoOfFour = (client: PlaybackClient, list: { url: string }[]) =>
    downloadSeries(client, systemClock, list, { mode: 'rlnc', proxies: 4, staging: true, spread: 2 });

  test('a fixed spread of 2 of 4: a segment is fetched from the proxies it was staged at, each proxy in turn', async () => {
    const { client, calls } = scriptedClient({}, {}, undefined, FOUR);
    const list = many(8);
    const result = await twoOfFour(client, list);
    expect(result.segments).toHaveLength(8);
    const used = calls.gets.map((g) => g.use!.map((p) => p.proxyId).sort());
    for (const u of used) expect(u).toHaveLength(2);
    for (const g of calls.gets) expect(g.proxies).toBe(2);
    for (const stage of calls.stages) {
      const i = list.findIndex((s) => s.url === stage.url);
      expect([...stage.proxies].sort()).toEqual(used[i]);
    }
    // Every proxy serves its share: four of eight segments each.
    for (const p of FOUR) expect(used.filter((u) => u.includes(p.proxyId))).toHaveLength(4);
    expect(result.staging.spread).toBe(2);
    expect(result.staging.spreadMoves).toBe(0);
  });

  test("a handoff gives the leaver's segments to its newcomer, staged there before their download", async () => {
    const list = many(6);
    // p2 fails in the first segment it serves (and would in every one).
    const { client, calls } = scriptedClient({}, Object.fromEntries(list.map((x) => [x.url, 'p2'])), undefined, FOUR);
    const result = await twoOfFour(client, list);
    expect(result.handoffs).toBe(1);
    const gets = calls.gets.map((g) => g.use!.map((p) => p.proxyId));
    const failedAt = gets.findIndex((u) => u.includes('p2'));
    expect(gets.slice(failedAt + 1).some((u) => u.includes('p2'))).toBe(false);
    const first = gets.findIndex((u) => u.includes('p3'));
    expect(first).toBeGreaterThan(failedAt);
    const stagedAtNewcomer = calls.stages.findIndex((st) => st.proxies.includes('p3'));
    expect(calls.stages[stagedAtNewcomer].url).toBe(list[first].url);
    for (const u of gets) expect(u).toHaveLength(2);
  });

  /**
   * A series of 40 segments of 2 MB from four proxies at 1792 KB/s each whose hints share one
   * origin path of `pathBps`; the clock moves with the downloads, and `pauseMs` between segments
   * (a player paced by its buffer). A hint is answered once the clock passes its origin time.
   */
  async function sharedPathSeries(pathBps: number, pauseMs = 0, spreadConfig?: Partial<SpreadConfig>) {
    const SEGMENT_BYTES = 2_000_000;
    const { client, calls } = scriptedClient({}, {}, undefined, FOUR);
    let t = 0;
    const clock = { now: () => t, setTimer: systemClock.setTimer };
    const due: { at: number; answer: () => void }[] = [];
    const stage = client.stage.bind(client);
    let out = 0;
    client.stage = async (url, proxies, o) => {
      // Hints out together share the path: each takes as many times longer.
      const originMs = Math.round((++out * proxies.length * SEGMENT_BYTES * 1000) / pathBps);
      const at = t + originMs;
      const answers = await stage(url, proxies, o);
      await new Promise<void>((answer) => due.push({ at, answer }));
      out--;
      return answers.map((a) => ({ ...a, originMs, bytes: SEGMENT_BYTES }));
    };
    const get = client.get.bind(client);
    const settle = () => new Promise((r) => setImmediate(r));
    client.get = async (url, o) => {
      await settle(); // the hints just sent are out
      t += pauseMs + Math.round((SEGMENT_BYTES * 1000) / (o.use!.length * 1792 * 1024));
      for (const d of due.filter((x) => x.at <= t)) {
        due.splice(due.indexOf(d), 1);
        d.answer();
      }
      await settle();
      // The Receiver measures each proxy at its 1792 KB/s.
      const r = (await get(url, o)) as DownloadResult;
      return { ...r, sources: r.sources.map((x) => ({ ...x, rateBps: 1792 * 1024 })) };
    };
    const result = await downloadSeries(client, clock, many(40), {
      mode: 'rlnc',
      proxies: 4,
      staging: true,
      ...(spreadConfig ? { spreadConfig } : {}),
    });
    return { result, sizes: calls.gets.map((g) => g.use!.length) };
  }

  test('auto: behind one 60 Mbit/s origin path shared by four proxies the spread stays at 2 from the start', async () => {
    const { result, sizes } = await sharedPathSeries(7.5e6);
    expect(result.staging.spread).toBe(2);
    expect(result.staging.spreadMoves).toBe(0);
    expect(sizes.every((k) => k === 2)).toBe(true);
  });

  test('auto begun at the whole set: behind the same path the spread falls to 2, and downloads follow', async () => {
    const { result, sizes } = await sharedPathSeries(7.5e6, 0, { start: 'set' });
    expect(result.staging.spread).toBe(2);
    expect(result.staging.spreadMoves).toBe(1);
    expect(sizes.slice(0, 3)).toEqual([4, 4, 4]);
    expect(sizes.slice(-10)).toEqual(Array(10).fill(2));
  });

  test('auto begun at the whole set: a paced player whose segments are staged in time keeps all four, however the rates compare', async () => {
    // The same path, but 4 s between segments: every hint is answered before its segment is asked for.
    const { result, sizes } = await sharedPathSeries(7.5e6, 4000, { start: 'set' });
    expect(result.staging.spreadMoves).toBe(0);
    expect(sizes.every((k) => k === 4)).toBe(true);
  });

  test('auto without staging (the unstaged way) keeps the whole set', async () => {
    const { client, calls } = scriptedClient({}, {}, undefined, FOUR);
    const result = await downloadSeries(client, systemClock, many(6), { mode: 'rlnc', proxies: 4, staging: false });
    for (const g of calls.gets) expect(g.use).toHaveLength(4);
    expect(result.staging.spreadMoves).toBe(0);
  });
});
