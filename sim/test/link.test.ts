/**
 * The per-packet link model (sim/src/link.ts): every stage against its closed form, seeded so a
 * failure reproduces exactly.
 */
import { DEFAULT_SYMBOL_SIZE, seededRandom } from '@mutp/shared';
import {
  DirectionSpec,
  JitterSpec,
  LinkSpec,
  linkAt,
  nextReconnectionMs,
  ScheduleSegment,
  ScheduleSpec,
} from '../src/link-spec';
import { SimLink, SimLinkDirection, stationaryLoss } from '../src/link';
import { Scenario, simulate } from '../src';

const PACKET = 1500;

function direction(spec: Partial<DirectionSpec>, seed = 1): SimLinkDirection {
  return new SimLinkDirection({ rate: { kind: 'unlimited' }, delayMs: 0, ...spec }, seededRandom(seed));
}

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

function sd(xs: number[]): number {
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
}

describe('SimLinkDirection: rate', () => {
  test('constant rate serialises FIFO at L/R after the one-way delay', () => {
    const link = direction({ rate: { kind: 'constant', bytesPerSecond: 150_000 }, delayMs: 20, queueBytes: 10e6 });
    const deliveries = Array.from({ length: 1000 }, () => link.send(0, PACKET));
    // 1500 B at 150 kB/s = 10 ms each.
    deliveries.forEach((d, k) => expect(d).toBeCloseTo(20 + (k + 1) * 10, 6));
  });

  test('constant rate: throughput of an overfed link is its rate', () => {
    const link = direction({ rate: { kind: 'constant', bytesPerSecond: 150_000 }, queueBytes: 30_000 });
    let delivered = 0;
    let last = 0;
    for (let t = 0; t < 10_000; t += 2) {
      const at = link.send(t, PACKET);
      if (at !== undefined && at <= 10_000) delivered++;
      if (at !== undefined) last = at;
    }
    // 10 s at 100 packets/s, minus the queue still draining at the end.
    expect(delivered).toBeGreaterThanOrEqual(999);
    expect(delivered).toBeLessThanOrEqual(1000);
    expect(last).toBeGreaterThan(10_000);
    expect(link.stats().dropped.queue).toBeGreaterThan(3000);
  });

  test('unlimited rate departs at once', () => {
    const link = direction({ delayMs: 7 });
    expect(link.send(3, PACKET)).toBe(10);
    expect(link.send(3, PACKET)).toBe(10);
  });

  test('trace: one 1504-byte opportunity per ms delivers one packet per ms', () => {
    const opportunitiesMs = Array.from({ length: 10 }, (_, i) => i + 1);
    const link = direction({ rate: { kind: 'trace', file: 't', opportunitiesMs }, queueBytes: 10e6 });
    const deliveries = Array.from({ length: 100 }, () => link.send(0, 1504));
    deliveries.forEach((d, k) => expect(d).toBe(k + 1));
  });

  test('trace: long-run rate is opportunities x 1504 B per period, duplicates count', () => {
    // Three opportunities every 10 ms (5 twice): 451.2 kB/s.
    const link = direction({ rate: { kind: 'trace', file: 't', opportunitiesMs: [5, 5, 10] }, queueBytes: 10e6 });
    let last = 0;
    for (let k = 0; k < 3000; k++) last = link.send(0, 1504)!;
    expect(last).toBe(10_000);
  });

  test('trace: packets share an opportunity, span opportunities, and an idle opportunity is wasted', () => {
    const link = direction({ rate: { kind: 'trace', file: 't', opportunitiesMs: [10] } });
    expect(link.send(0, 752)).toBe(10);
    expect(link.send(0, 752)).toBe(10); // the rest of the same opportunity
    expect(link.send(0, 3000)).toBe(30); // needs two opportunities (20 and 30)
    expect(link.send(35, 100)).toBe(40); // 30's leftover is gone: it arrived after 30
    expect(link.send(40, 100)).toBe(40); // queued at 40 (same instant): 40's leftover serves it
    expect(link.send(41, 1504)).toBe(50);
  });
});

describe('SimLinkDirection: queue', () => {
  test('drop-tail: an overfed queue takes queueBytes, drops the rest, and drains at the rate', () => {
    const link = direction({ rate: { kind: 'constant', bytesPerSecond: 150_000 }, queueBytes: 10 * PACKET });
    const burst = Array.from({ length: 100 }, () => link.send(0, PACKET));
    expect(burst.filter((d) => d !== undefined)).toHaveLength(10);
    expect(link.stats().dropped.queue).toBe(90);
    // At 50 ms five packets have left: room for five more.
    const later = Array.from({ length: 10 }, () => link.send(50, PACKET));
    expect(later.filter((d) => d !== undefined)).toHaveLength(5);
    expect(later[0]).toBeCloseTo(110, 6);
  });
});

describe('SimLinkDirection: loss', () => {
  test('i.i.d. loss rate within tolerance over 10^5 packets', () => {
    const link = direction({ loss: { kind: 'iid', p: 0.1 } }, 11);
    for (let k = 0; k < 100_000; k++) link.send(k, PACKET);
    const { dropped, delivered, sent } = link.stats();
    expect(sent).toBe(100_000);
    expect(dropped.loss + delivered).toBe(100_000);
    // sd of the rate: sqrt(0.09 / 1e5) ~ 0.00095; five of them.
    expect(Math.abs(dropped.loss / 100_000 - 0.1)).toBeLessThan(0.005);
  });

  test('Gilbert-Elliott: stationary loss and mean burst length', () => {
    const loss = { kind: 'gilbertElliott', pGoodToBad: 0.01, pBadToGood: 0.25, lossGood: 0, lossBad: 1 } as const;
    const link = direction({ loss }, 5);
    const n = 200_000;
    let lost = 0;
    let bursts = 0;
    let inBurst = false;
    for (let k = 0; k < n; k++) {
      const isLost = link.send(k, PACKET) === undefined;
      if (isLost) lost++;
      if (isLost && !inBurst) bursts++;
      inBurst = isLost;
    }
    // 0.01 / 0.26 = 0.0385; bursts geometric with mean 1 / pBadToGood = 4.
    expect(stationaryLoss(loss)).toBeCloseTo(0.01 / 0.26, 10);
    expect(Math.abs(lost / n - stationaryLoss(loss))).toBeLessThan(0.004);
    expect(Math.abs(lost / bursts - 4)).toBeLessThan(0.4);
  });

  test('a lost packet used the link', () => {
    // The first packet (arriving in a segment with certain loss) is lost but took its 10 ms.
    const link = direction({
      rate: { kind: 'constant', bytesPerSecond: 150_000 },
      schedule: {
        loop: false,
        segments: [
          { durationMs: 1, connected: true, loss: { kind: 'iid', p: 1 } },
          { durationMs: 1, connected: true },
        ],
      },
    });
    expect(link.send(0, PACKET)).toBeUndefined();
    expect(link.send(1, PACKET)).toBeCloseTo(20, 6);
  });
});

describe('SimLinkDirection: schedule', () => {
  const onOff = {
    loop: true,
    segments: [
      { durationMs: 1000, connected: true },
      { durationMs: 1000, connected: false },
    ],
  };

  test('packets offered while disconnected are dropped; connected ones get through', () => {
    const link = direction({ delayMs: 5, schedule: onOff });
    const delivered: number[] = [];
    for (let t = 0; t < 4000; t += 10) {
      const at = link.send(t, PACKET);
      if (at !== undefined) delivered.push(t);
    }
    expect(delivered).toHaveLength(200);
    expect(delivered.every((t) => t % 2000 < 1000)).toBe(true);
    expect(link.stats().dropped.disconnected).toBe(200);
  });

  test('a disconnection drops what is still queued; what already left is delivered', () => {
    // 10 ms per packet; 20 packets offered at 900 ms: ten leave by 1000 ms, ten are caught.
    const link = direction({
      rate: { kind: 'constant', bytesPerSecond: 150_000 },
      delayMs: 50,
      queueBytes: 10e6,
      schedule: onOff,
    });
    const burst = Array.from({ length: 20 }, () => link.send(900, PACKET));
    expect(burst.slice(0, 10).every((d) => d !== undefined)).toBe(true);
    expect(burst[9]).toBeCloseTo(1050, 6); // departed at 1000, delivered in the off period
    expect(burst.slice(10).every((d) => d === undefined)).toBe(true);
    // A packet arriving behind the caught ones before the disconnection is caught too.
    expect(link.send(950, 10)).toBeUndefined();
    expect(link.stats().dropped.disconnected).toBe(11);
    // Back on at 2000 with an empty queue.
    expect(link.send(2000, PACKET)).toBeCloseTo(2060, 6);
  });

  test('non-looping schedule: the last segment lasts forever', () => {
    const link = direction({
      schedule: {
        loop: false,
        segments: [
          { durationMs: 100, connected: false },
          { durationMs: 100, connected: true },
        ],
      },
    });
    expect(link.send(50, PACKET)).toBeUndefined();
    expect(link.send(150, PACKET)).toBe(150);
    expect(link.send(1e6, PACKET)).toBe(1e6);
  });

  test('per-segment delay applies by arrival time', () => {
    const link = direction({
      delayMs: 10,
      schedule: {
        loop: false,
        segments: [
          { durationMs: 100, connected: true, delayMs: 40 },
          { durationMs: 1, connected: true },
        ],
      },
    });
    expect(link.send(0, PACKET)).toBe(40);
    expect(link.send(100, PACKET)).toBe(110);
  });
});

describe('SimLinkDirection: delay and jitter', () => {
  test('FIFO: delivery times never decrease under heavy jitter', () => {
    const link = direction({ delayMs: 50, jitter: { kind: 'normal', sdMs: 20 } }, 3);
    let previous = -Infinity;
    let clamped = 0;
    for (let k = 0; k < 10_000; k++) {
      const at = link.send(k, PACKET)!;
      expect(at).toBeGreaterThanOrEqual(previous);
      if (at === previous) clamped++;
      previous = at;
    }
    expect(clamped).toBeGreaterThan(0);
  });

  test('normal jitter has the configured sd (packets sparse enough that FIFO never holds one)', () => {
    const link = direction({ delayMs: 100, jitter: { kind: 'normal', sdMs: 10 } }, 9);
    const delays = Array.from({ length: 20_000 }, (_, k) => link.send(k * 1000, PACKET)! - k * 1000);
    expect(Math.abs(mean(delays) - 100)).toBeLessThan(0.3);
    expect(Math.abs(sd(delays) - 10)).toBeLessThan(0.3);
  });

  test('uniform jitter lies in [0, max) with mean max / 2; delay never negative', () => {
    const link = direction({ delayMs: 1, jitter: { kind: 'uniform', maxMs: 8 } }, 4);
    const delays = Array.from({ length: 20_000 }, (_, k) => link.send(k * 100, PACKET)! - k * 100);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...delays)).toBeLessThan(9);
    expect(Math.abs(mean(delays) - 5)).toBeLessThan(0.1);
    const clampedLink = direction({ delayMs: 1, jitter: { kind: 'normal', sdMs: 50 } }, 4);
    for (let k = 0; k < 1000; k++) expect(clampedLink.send(k * 1000, PACKET)!).toBeGreaterThanOrEqual(k * 1000);
  });

  test('mixture jitter: mean is the weighted mean of the components', () => {
    const jitter: JitterSpec = {
      kind: 'mixture',
      components: [
        { weight: 3, meanMs: 0, sdMs: 1 },
        { weight: 1, meanMs: 40, sdMs: 1 },
      ],
    };
    const link = direction({ delayMs: 20, jitter }, 8);
    const delays = Array.from({ length: 20_000 }, (_, k) => link.send(k * 1000, PACKET)! - k * 1000);
    expect(Math.abs(mean(delays) - 30)).toBeLessThan(0.6);
    expect(delays.filter((d) => d > 40).length / delays.length).toBeCloseTo(0.25, 1);
  });

  test('correlated jitter: neighbouring samples follow each other', () => {
    const link = direction({ delayMs: 100, jitter: { kind: 'normal', sdMs: 10 }, jitterCorrelation: 0.9 }, 2);
    const delays = Array.from({ length: 20_000 }, (_, k) => link.send(k * 1000, PACKET)! - k * 1000);
    const m = mean(delays);
    let num = 0;
    let den = 0;
    for (let k = 1; k < delays.length; k++) num += (delays[k] - m) * (delays[k - 1] - m);
    for (const d of delays) den += (d - m) ** 2;
    expect(num / den).toBeGreaterThan(0.85);
  });
});

describe('SimLink', () => {
  const spec: LinkSpec = {
    down: { rate: { kind: 'constant', bytesPerSecond: 1e6 }, delayMs: 20, loss: { kind: 'iid', p: 0.2 } },
    up: { rate: { kind: 'unlimited' }, delayMs: 20, loss: { kind: 'iid', p: 0.2 } },
  };

  test('is deterministic for a seed, and the directions draw independently', () => {
    const run = (seed: number) => {
      const link = new SimLink(spec, seededRandom(seed));
      const out: (number | undefined)[] = [];
      for (let k = 0; k < 200; k++) out.push(link.down.send(k, PACKET), link.up.send(k, 100));
      return { out, drops: link.drops() };
    };
    expect(run(42)).toEqual(run(42));
    expect(run(42).out).not.toEqual(run(43).out);
    const { drops } = run(42);
    expect(drops.loss).toBeGreaterThan(40);
    expect(drops.queue + drops.disconnected).toBe(0);
  });
});

describe('the simulators over emulated links (Scenario.paths / .access)', () => {
  const base: Scenario = {
    mode: 'rlnc',
    scheduler: 'rarest',
    capsKBps: [896, 1792],
    objectBytes: 1024 * 1024,
    rttMs: 40,
    jitterMs: 0,
    loss: 0.01,
    window: 240,
    generationSize: 24,
    symbolSize: DEFAULT_SYMBOL_SIZE,
    seed: 7,
  };
  /** The old model's path as a link: 20 ms each way, i.i.d. loss both ways, no rate limit. */
  const oldModelPath = (loss: number): LinkSpec => ({
    down: { rate: { kind: 'unlimited' }, delayMs: 20, loss: { kind: 'iid', p: loss } },
    up: { rate: { kind: 'unlimited' }, delayMs: 20, loss: { kind: 'iid', p: loss } },
  });
  const withPaths = (s: Scenario): Scenario => ({ ...s, paths: s.capsKBps.map(() => oldModelPath(s.loss)) });
  const onOffAccess: LinkSpec = {
    down: {
      rate: { kind: 'unlimited' },
      delayMs: 1,
      schedule: {
        loop: true,
        segments: [
          { durationMs: 300, connected: true },
          { durationMs: 200, connected: false },
        ],
      },
    },
    up: { rate: { kind: 'unlimited' }, delayMs: 1 },
  };

  test('paths equal to the old model give an efficiency close to the old model (rlnc and http)', () => {
    for (const mode of ['rlnc', 'http'] as const) {
      const s = { ...base, mode };
      const old = simulate(s);
      const linked = simulate(withPaths(s));
      expect(old.status).toBe('complete');
      expect(linked.status).toBe('complete');
      expect(Math.abs(linked.efficiency - old.efficiency)).toBeLessThan(0.05);
      expect(old.linkDrops).toBeUndefined();
    }
    const drops = simulate(withPaths(base)).linkDrops!;
    expect(drops.loss).toBeGreaterThan(0);
    expect(drops.queue + drops.disconnected).toBe(0);
  });

  test('an on/off access link: rlnc completes later, byte-exact; http completes later too', () => {
    for (const mode of ['rlnc', 'http'] as const) {
      const s = withPaths({ ...base, mode });
      const steady = simulate(s);
      const onOff = simulate({ ...s, access: onOffAccess });
      expect(onOff.status).toBe('complete');
      expect(onOff.byteExact).toBe(true);
      expect(onOff.downloadMs).toBeGreaterThan(steady.downloadMs);
      if (mode === 'rlnc') expect(onOff.linkDrops!.disconnected).toBeGreaterThan(0);
    }
  });

  test('a shared constant-rate access link caps the download at its rate', () => {
    const access: LinkSpec = {
      down: { rate: { kind: 'constant', bytesPerSecond: 1024 * 1024 }, delayMs: 5, queueBytes: 64 * 1024 },
      up: { rate: { kind: 'unlimited' }, delayMs: 5 },
    };
    const s: Scenario = { ...withPaths({ ...base, loss: 0 }), access };
    const r = simulate(s);
    expect(r.status).toBe('complete');
    expect(r.byteExact).toBe(true);
    // 1 MiB plus headers over 1 MiB/s: at least a second; the sources' 2.6 MiB/s would take 0.4 s.
    expect(r.downloadMs).toBeGreaterThan(1000);
    expect(r.downloadMs).toBeLessThan(2000);
    const http = simulate({ ...s, mode: 'http' });
    expect(http.downloadMs).toBeGreaterThan(1000);
  });

  test('results are deterministic for a seed', () => {
    const s: Scenario = {
      ...withPaths({ ...base, objectBytes: 256 * 1024 }),
      access: {
        down: { rate: { kind: 'constant', bytesPerSecond: 2e6 }, delayMs: 10, jitter: { kind: 'normal', sdMs: 3 } },
        up: { rate: { kind: 'unlimited' }, delayMs: 10 },
      },
    };
    const a = simulate(s);
    const b = simulate(s);
    expect(a.status).toBe('complete');
    expect({ ...a, scenario: undefined }).toEqual({ ...b, scenario: undefined });
    expect(simulate({ ...s, seed: 8 }).downloadMs).not.toBe(a.downloadMs);
  });

  test('a scenario whose path count differs from its sources is rejected', () => {
    expect(() => simulate({ ...base, paths: [oldModelPath(0)] })).toThrow(RangeError);
  });
});

describe('linkAt: a link as it stands later in its run', () => {
  const direction = (schedule: ScheduleSpec): DirectionSpec => ({ rate: { kind: 'unlimited' }, delayMs: 1, schedule });
  const on = (durationMs: number): ScheduleSegment => ({ durationMs, connected: true });
  const off = (durationMs: number): ScheduleSegment => ({ durationMs, connected: false });

  test('a looping schedule is rotated: same period, starting mid-segment', () => {
    const spec = {
      down: direction({ loop: true, segments: [on(12_000), off(8_000)] }),
      up: direction({ loop: true, segments: [on(12_000), off(8_000)] }),
    };
    const later = linkAt(spec, 20_000 * 3 + 15_000);
    expect(later.down.schedule).toEqual({ loop: true, segments: [off(5_000), on(12_000), off(3_000)] });
    expect(linkAt(spec, 0)).toEqual(spec);
  });

  test('a non-looping schedule drops its past and keeps its last segment', () => {
    const d = direction({ loop: false, segments: [on(1_000), off(1_000), on(500)] });
    expect(linkAt({ down: d, up: d }, 1_500).down.schedule).toEqual({ loop: false, segments: [off(500), on(500)] });
    expect(linkAt({ down: d, up: d }, 10_000).down.schedule).toEqual({ loop: false, segments: [on(500)] });
  });

  test('a trace is rotated by its period', () => {
    const d: DirectionSpec = { rate: { kind: 'trace', file: 't', opportunitiesMs: [1, 2, 3, 4] }, delayMs: 0 };
    const rate = linkAt({ down: d, up: d }, 4 * 10 + 2).down.rate;
    expect(rate).toEqual({ kind: 'trace', file: 't', opportunitiesMs: [1, 2, 3, 4] });
  });
});

describe('nextReconnectionMs: when the link next comes back after a disconnection', () => {
  const on = (durationMs: number): ScheduleSegment => ({ durationMs, connected: true });
  const off = (durationMs: number): ScheduleSegment => ({ durationMs, connected: false });

  test('a looping encounter/disconnection cycle: the next encounter, in this period or the next', () => {
    const schedule: ScheduleSpec = { loop: true, segments: [on(12_000), off(8_000)] };
    expect(nextReconnectionMs(schedule, 0)).toBe(0);
    expect(nextReconnectionMs(schedule, 5_000)).toBe(15_000);
    expect(nextReconnectionMs(schedule, 13_000)).toBe(7_000);
    expect(nextReconnectionMs(schedule, 20_000 * 7 + 19_999)).toBe(1);
  });

  test('two connected stretches in a row are one encounter: only the one after a gap counts', () => {
    const schedule: ScheduleSpec = { loop: true, segments: [on(1_000), on(2_000), off(1_000)] };
    expect(nextReconnectionMs(schedule, 500)).toBe(3_500);
  });

  test('no disconnection, or none left in a schedule that does not loop: undefined', () => {
    expect(nextReconnectionMs({ loop: true, segments: [on(1_000), on(1_000)] }, 0)).toBeUndefined();
    const once: ScheduleSpec = { loop: false, segments: [on(1_000), off(1_000), on(1_000)] };
    expect(nextReconnectionMs(once, 500)).toBe(1_500);
    expect(nextReconnectionMs(once, 2_500)).toBeUndefined();
  });
});
