/**
 * Packet schedulers against a fake ScheduleView, and the slot Partition they share.
 */
import fc from 'fast-check';
import {
  createScheduler,
  DEFAULT_SCHEDULER,
  Mode,
  Partition,
  ScheduleView,
  Scheduler,
  SchedulerName,
  schedulerSupports,
  seededRandom,
} from '../src/internal';

/** A source's view of the window, set by hand. Records any query outside the window. */
class FakeView implements ScheduleView {
  windowStart = 0;
  windowEnd = 0;
  sourceIndex = 0;
  partition = Partition.equal(1);
  generationSize = 1;
  defaultSize = 1;
  /** Units below this index are overdue. */
  overdueBelow = -Infinity;
  redundancyPerUnit = 0;
  /** Loss allowance as a fraction of the packets asked for. */
  lossFraction = 0;
  readonly ranks = new Map<number, number>();
  readonly transit = new Map<number, number>();
  readonly delivered = new Map<number, number>();
  readonly sizes = new Map<number, number>();
  readonly outside: number[] = [];

  constructor(init: Partial<FakeView> = {}) {
    Object.assign(this, init);
  }

  private touch(u: number): void {
    if (u < this.windowStart || u >= this.windowEnd) this.outside.push(u);
  }
  rank(u: number): number {
    this.touch(u);
    return this.ranks.get(u) ?? 0;
  }
  unitSize(u: number): number {
    this.touch(u);
    return this.sizes.get(u) ?? this.defaultSize;
  }
  inTransit(u: number): number {
    this.touch(u);
    return this.transit.get(u) ?? 0;
  }
  deliveredOwn(u: number): number {
    this.touch(u);
    return this.delivered.get(u) ?? 0;
  }
  ownerOf(u: number, slot: number): number {
    this.touch(u);
    return this.partition.owner(slot);
  }
  redundancy(u: number): number {
    this.touch(u);
    return this.redundancyPerUnit;
  }
  lossAllowance(packets: number): number {
    return Math.ceil(packets * this.lossFraction);
  }
  overdue(u: number): boolean {
    this.touch(u);
    return u < this.overdueBelow;
  }
  units(): number[] {
    return Array.from({ length: this.windowEnd - this.windowStart }, (_, i) => this.windowStart + i);
  }
}

function pick(scheduler: Scheduler, view: FakeView): number {
  const u = scheduler.pick(view);
  if (view.outside.length > 0) throw new Error(`scheduler looked at units outside the window: ${view.outside}`);
  if (u !== -1 && (u < view.windowStart || u >= view.windowEnd))
    throw new Error(`picked ${u} outside [${view.windowStart}, ${view.windowEnd})`);
  return u;
}

const noRandom = () => {
  throw new Error('this scheduler must not draw random numbers');
};

// ------------------------------------------------------------------ factory

describe('createScheduler', () => {
  const combos: [Mode, SchedulerName, boolean][] = [
    ['uncoded', 'random', true],
    ['uncoded', 'partitioned', true],
    ['uncoded', 'rarest', false],
    ['rlnc', 'rarest', true],
    ['rlnc', 'partitioned', true],
    ['rlnc', 'random', false],
    ['fountain', 'partitioned', true],
    ['fountain', 'rarest', false],
    ['fountain', 'random', false],
  ];

  test.each(combos)('%s + %s supported: %s', (mode, name, supported) => {
    expect(schedulerSupports(mode, name)).toBe(supported);
    if (supported) {
      expect(createScheduler(mode, name, seededRandom(1)).name).toBe(name);
    } else {
      expect(() => createScheduler(mode, name, seededRandom(1))).toThrow(RangeError);
    }
  });

  test('unknown scheduler names are rejected', () => {
    expect(() => createScheduler('uncoded', 'fastest' as SchedulerName, seededRandom(1))).toThrow(RangeError);
    expect(() => createScheduler('rlnc', 'fastest' as SchedulerName, seededRandom(1))).toThrow(RangeError);
  });

  test('the defaults are supported by their mode', () => {
    for (const mode of ['uncoded', 'rlnc', 'fountain'] as const)
      expect(schedulerSupports(mode, DEFAULT_SCHEDULER[mode])).toBe(true);
  });
});

// ------------------------------------------------------------------ random (uncoded)

describe('random scheduler (uncoded)', () => {
  test('picks uniformly among sendable units only', () => {
    const view = new FakeView({ windowStart: 10, windowEnd: 40 });
    for (const u of [10, 11, 15, 20, 33]) view.ranks.set(u, 1); // acknowledged
    for (const u of [12, 25, 39]) view.transit.set(u, 1); // in transit
    const sendable = view.units().filter((u) => !view.ranks.has(u) && !view.transit.has(u));
    expect(sendable.length).toBe(22);
    const scheduler = createScheduler('uncoded', 'random', seededRandom(2024));
    const counts = new Map<number, number>();
    const picks = 22_000;
    for (let i = 0; i < picks; i++) {
      const u = pick(scheduler, view);
      if (!sendable.includes(u)) throw new Error(`picked ${u}, which is not sendable`);
      counts.set(u, (counts.get(u) ?? 0) + 1);
    }
    for (const u of sendable) {
      const n = counts.get(u) ?? 0;
      // Expected 1000 each; a loose band, not a statistical test.
      if (n < 700 || n > 1300) throw new Error(`unit ${u} picked ${n} times out of ${picks}`);
    }
  });

  test('returns -1 when nothing in the window is sendable, and never looks outside it', () => {
    const view = new FakeView({ windowStart: 3, windowEnd: 7 });
    for (const u of [3, 5]) view.ranks.set(u, 1);
    for (const u of [4, 6]) view.transit.set(u, 2);
    view.ranks.set(7, 0); // just past the window: must not be chosen
    expect(pick(createScheduler('uncoded', 'random', seededRandom(1)), view)).toBe(-1);
    expect(pick(createScheduler('uncoded', 'random', seededRandom(1)), new FakeView())).toBe(-1);
  });

  test('property: the pick is sendable, or -1 exactly when none is', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1000 }),
        fc.array(fc.constantFrom('free', 'acked', 'transit'), { maxLength: 64 }),
        fc.integer({ min: 0, max: 0xffffffff }),
        (start, states, seed) => {
          const view = new FakeView({ windowStart: start, windowEnd: start + states.length });
          states.forEach((s, i) => {
            if (s === 'acked') view.ranks.set(start + i, 1);
            if (s === 'transit') view.transit.set(start + i, 1);
          });
          const u = pick(createScheduler('uncoded', 'random', seededRandom(seed)), view);
          if (u === -1) expect(states.includes('free')).toBe(false);
          else expect(states[u - start]).toBe('free');
        },
      ),
      { seed: 42, numRuns: 300 },
    );
  });
});

// ------------------------------------------------------------------ partitioned (uncoded)

describe('partitioned scheduler (uncoded)', () => {
  const partition = new Partition([1, 1, 1]);
  const ownedBy = (source: number, from: number, to: number) =>
    Array.from({ length: to - from }, (_, i) => from + i).filter((u) => partition.owner(u) === source);

  test('sends its own units lowest first, then nothing until others are overdue', () => {
    const scheduler = createScheduler('uncoded', 'partitioned', noRandom);
    const view = new FakeView({ windowStart: 0, windowEnd: 30, sourceIndex: 1, partition });
    const own = ownedBy(1, 0, 30);
    expect(own.length).toBeGreaterThan(5);
    const order: number[] = [];
    for (let u = pick(scheduler, view); u !== -1; u = pick(scheduler, view)) {
      order.push(u);
      view.transit.set(u, 1);
    }
    expect(order).toEqual(own);
    // Others' units become overdue from the bottom of the window: help with the oldest first.
    view.overdueBelow = 4;
    const firstOthers = [0, 1, 2, 3].filter((u) => partition.owner(u) !== 1);
    expect(firstOthers.length).toBeGreaterThan(0);
    const helped: number[] = [];
    for (let u = pick(scheduler, view); u !== -1; u = pick(scheduler, view)) {
      helped.push(u);
      view.transit.set(u, 1);
    }
    expect(helped).toEqual(firstOthers);
  });

  test('own units that are acknowledged or in transit are skipped; help stops at the first unit not overdue', () => {
    const scheduler = createScheduler('uncoded', 'partitioned', noRandom);
    const view = new FakeView({ windowStart: 10, windowEnd: 40, sourceIndex: 0, partition });
    const own = ownedBy(0, 10, 40);
    view.ranks.set(own[0], 1);
    view.transit.set(own[1], 1);
    expect(pick(scheduler, view)).toBe(own[2]);
    for (const u of own) view.ranks.set(u, 1);
    expect(pick(scheduler, view)).toBe(-1);
    // Overdue covers [10, 12) only, and both are done: a sendable unit above is not helped.
    view.overdueBelow = 12;
    view.ranks.set(10, 1).set(11, 1);
    expect(pick(scheduler, view)).toBe(-1);
    view.overdueBelow = 13;
    expect(pick(scheduler, view)).toBe(view.ranks.has(12) ? -1 : 12);
  });

  test('property: own sendable units first (lowest), else the lowest overdue sendable unit, else -1', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 0, max: 500 }),
        fc.array(fc.constantFrom('free', 'acked', 'transit'), { maxLength: 48 }),
        fc.integer({ min: 0, max: 48 }),
        (weights, sourceRaw, start, states, overdueCount) => {
          const p = new Partition(weights);
          const sourceIndex = sourceRaw % weights.length;
          const view = new FakeView({
            windowStart: start,
            windowEnd: start + states.length,
            sourceIndex,
            partition: p,
            overdueBelow: start + overdueCount,
          });
          states.forEach((s, i) => {
            if (s === 'acked') view.ranks.set(start + i, 1);
            if (s === 'transit') view.transit.set(start + i, 1);
          });
          const free = view.units().filter((u) => states[u - start] === 'free');
          const own = free.filter((u) => p.owner(u) === sourceIndex);
          const overdue = free.filter((u) => u < start + overdueCount);
          const expected = own.length > 0 ? own[0] : overdue.length > 0 ? overdue[0] : -1;
          expect(pick(createScheduler('uncoded', 'partitioned', noRandom), view)).toBe(expected);
        },
      ),
      { seed: 42, numRuns: 300 },
    );
  });
});

// ------------------------------------------------------------------ rarest (rlnc)

describe('rarest scheduler (rlnc)', () => {
  test('picks the generation with least rank + own packets in transit', () => {
    const scheduler = createScheduler('rlnc', 'rarest', noRandom);
    const view = new FakeView({ windowStart: 5, windowEnd: 10, generationSize: 8, defaultSize: 8 });
    view.ranks.set(5, 3).set(6, 1).set(7, 2).set(8, 0).set(9, 5);
    view.transit.set(5, 0).set(6, 2).set(7, 0).set(8, 4).set(9, 0);
    // rank + transit: 3, 3, 2, 4, 5 -> generation 7
    expect(pick(scheduler, view)).toBe(7);
    view.transit.set(7, 2); // 4 -> ties 5 and 6 at 3: the lowest wins
    expect(pick(scheduler, view)).toBe(5);
  });

  test('skips generations whose rank + transit already covers their size (short last one included)', () => {
    const scheduler = createScheduler('rlnc', 'rarest', noRandom);
    const view = new FakeView({ windowStart: 0, windowEnd: 3, generationSize: 4, defaultSize: 4 });
    view.sizes.set(2, 2);
    view.ranks.set(0, 4).set(1, 1).set(2, 0);
    view.transit.set(1, 3).set(2, 1);
    // 0 complete, 1 covered (1 + 3 = 4), 2 has 1 of 2 -> 2
    expect(pick(scheduler, view)).toBe(2);
    view.transit.set(2, 2);
    expect(pick(scheduler, view)).toBe(-1);
  });

  test('property: the pick minimises rank + transit among generations not yet covered', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 32 }),
        fc.array(fc.record({ rank: fc.nat(40), transit: fc.nat(40) }), { maxLength: 30 }),
        (g, gens) => {
          const view = new FakeView({
            windowStart: 100,
            windowEnd: 100 + gens.length,
            generationSize: g,
            defaultSize: g,
          });
          gens.forEach((x, i) => {
            view.ranks.set(100 + i, Math.min(x.rank, g));
            view.transit.set(100 + i, x.transit);
          });
          const score = (i: number) => Math.min(gens[i].rank, g) + gens[i].transit;
          const candidates = gens.map((_, i) => i).filter((i) => score(i) < g);
          const u = pick(createScheduler('rlnc', 'rarest', noRandom), view);
          if (candidates.length === 0) {
            expect(u).toBe(-1);
          } else {
            const best = Math.min(...candidates.map(score));
            expect(u).toBe(100 + candidates.find((i) => score(i) === best)!);
          }
        },
      ),
      { seed: 42, numRuns: 300 },
    );
  });
});

// ------------------------------------------------------------------ partitioned (rlnc)

describe('partitioned scheduler (rlnc)', () => {
  const g = 8;
  const partition = new Partition([1, 1]);
  /** Slots of generation u that source s owns among the first `slots`. */
  const owned = (u: number, s: number, slots = g) =>
    Array.from({ length: slots }, (_, t) => u * g + t).filter((slot) => partition.owner(slot) === s).length;

  function view(init: Partial<FakeView> = {}): FakeView {
    return new FakeView({ windowStart: 0, windowEnd: 4, generationSize: g, defaultSize: g, partition, ...init });
  }

  test('sends into the lowest generation until its own slots are covered by transit + delivered', () => {
    const scheduler = createScheduler('rlnc', 'partitioned', noRandom);
    for (const source of [0, 1]) {
      const v = view({ sourceIndex: source });
      const k = owned(0, source);
      expect(k).toBeGreaterThan(0);
      expect(k).toBeLessThan(g);
      const sentTo: number[] = [];
      for (let i = 0; i < 100; i++) {
        const u = pick(scheduler, v);
        if (u === -1) break;
        sentTo.push(u);
        v.transit.set(u, (v.transit.get(u) ?? 0) + 1);
      }
      // Exactly its share of every generation in the window, lowest generation first.
      const expected = [0, 1, 2, 3].flatMap((u) => new Array<number>(owned(u, source)).fill(u));
      expect(sentTo).toEqual(expected);
    }
  });

  test('ownership is over the whole generation: others delivering does not shift it', () => {
    const scheduler = createScheduler('rlnc', 'partitioned', noRandom);
    const v = view({ sourceIndex: 0, windowEnd: 1 });
    const k = owned(0, 0);
    v.delivered.set(0, k - 1);
    v.ranks.set(0, g - 1); // everyone else delivered their share already
    expect(pick(scheduler, v)).toBe(0);
    v.transit.set(0, 1); // budget used up: transit + delivered = k
    expect(pick(scheduler, v)).toBe(-1);
    v.ranks.set(0, 0); // even if the client lost everything, the budget is the same
    expect(pick(scheduler, v)).toBe(-1);
  });

  test('a complete generation is skipped, whatever the budget', () => {
    const scheduler = createScheduler('rlnc', 'partitioned', noRandom);
    const v = view({ sourceIndex: 0 });
    v.ranks.set(0, g);
    expect(pick(scheduler, v)).toBe(1);
  });

  test('redundancy extends the slots a source may fill beyond the generation size', () => {
    const scheduler = createScheduler('rlnc', 'partitioned', noRandom);
    const r = 4;
    const v = view({ sourceIndex: 1, windowEnd: 1, redundancyPerUnit: r });
    const k = owned(0, 1, g + r);
    expect(k).toBeGreaterThan(owned(0, 1));
    v.transit.set(0, k - 1);
    expect(pick(scheduler, v)).toBe(0);
    v.transit.set(0, k);
    expect(pick(scheduler, v)).toBe(-1);
  });

  test('with its own slots covered it helps only overdue generations, one packet at a time, oldest first', () => {
    const scheduler = createScheduler('rlnc', 'partitioned', noRandom);
    const v = view({ sourceIndex: 0 });
    for (const u of [0, 1, 2, 3]) v.delivered.set(u, owned(u, 0));
    expect(pick(scheduler, v)).toBe(-1);
    v.overdueBelow = 2;
    expect(pick(scheduler, v)).toBe(0);
    v.transit.set(0, 1);
    expect(pick(scheduler, v)).toBe(1);
    v.transit.set(1, 1);
    expect(pick(scheduler, v)).toBe(-1); // 2 and 3 are not overdue yet
    v.ranks.set(0, g);
    v.transit.set(1, 0);
    expect(pick(scheduler, v)).toBe(1);
  });

  test('a zero weight owns nothing: such a source only helps', () => {
    const scheduler = createScheduler('rlnc', 'partitioned', noRandom);
    const v = view({ sourceIndex: 1, partition: new Partition([5, 0, 3]) });
    expect(pick(scheduler, v)).toBe(-1);
    v.overdueBelow = 1;
    expect(pick(scheduler, v)).toBe(0);
  });
});

// ------------------------------------------------------------------ Partition

describe('fountain scheduler', () => {
  const partition = new Partition([1, 3]); // source 0 owns a quarter, source 1 three quarters
  function view(init: Partial<FakeView> = {}): FakeView {
    return new FakeView({ windowStart: 0, windowEnd: 2, defaultSize: 100, partition, ...init });
  }
  const scheduler = createScheduler('fountain', 'partitioned', noRandom);

  test('keeps in flight at most its share of what the lowest block still misses', () => {
    const v = view({ sourceIndex: 0 });
    v.ranks.set(0, 60); // 40 missing: source 0 may have ceil(0.25 * 40) = 10 in flight
    v.transit.set(0, 9);
    expect(pick(scheduler, v)).toBe(0);
    v.transit.set(0, 10);
    expect(pick(scheduler, v)).toBe(1); // block 0 covered: on to the next block in the window
    v.transit.set(1, 25);
    expect(pick(scheduler, v)).toBe(-1);
    const fast = view({ sourceIndex: 1 });
    fast.ranks.set(0, 60);
    fast.transit.set(0, 29);
    expect(pick(scheduler, fast)).toBe(0); // ceil(0.75 * 40) = 30
  });

  test('the loss allowance raises the quota', () => {
    const v = view({ sourceIndex: 0, lossFraction: 0.1, windowEnd: 1 });
    v.ranks.set(0, 60);
    v.transit.set(0, 10);
    expect(pick(scheduler, v)).toBe(0); // 10 + ceil(10 * 0.1) = 11
    v.transit.set(0, 11);
    expect(pick(scheduler, v)).toBe(-1);
  });

  test('a decoded block is skipped; with its quota met a source helps one packet at a time when overdue', () => {
    const v = view({ sourceIndex: 0 });
    v.ranks.set(0, 100);
    v.ranks.set(1, 99);
    v.transit.set(1, 1);
    expect(pick(scheduler, v)).toBe(-1);
    const zero = view({ sourceIndex: 0, partition: new Partition([0, 1]), overdueBelow: 1 });
    expect(pick(scheduler, zero)).toBe(0);
    zero.transit.set(0, 1);
    expect(pick(scheduler, zero)).toBe(-1);
  });
});

describe('Partition', () => {
  test('share() is the fraction of slots a source owns, and the shares sum to 1', () => {
    const p = new Partition([1, 3, 0, 4]);
    expect(p.share(0)).toBeCloseTo(1 / 8, 9);
    expect(p.share(1)).toBeCloseTo(3 / 8, 9);
    expect(p.share(2)).toBe(0);
    expect(p.share(3)).toBeCloseTo(4 / 8, 9);
    expect(Partition.equal(3).share(2)).toBeCloseTo(1 / 3, 9);
  });

  /** Reference owner from docs/protocol.md §9.3. */
  function refOwner(weights: number[], slot: number): number {
    let total = weights.reduce((a, b) => a + b, 0);
    const w = total === 0 ? weights.map(() => 1) : weights;
    if (total === 0) total = weights.length;
    const x = Number((BigInt(slot + 1) * 0x9e3779b9n) % 0x100000000n);
    let acc = 0;
    for (let i = 0; i < w.length; i++) {
      acc += w[i];
      const bound = i === w.length - 1 ? 0x100000000 : Math.floor((acc / total) * 0x100000000);
      if (x < bound) return i;
    }
    return w.length - 1;
  }

  const weightsArb = fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 32 });

  test('owner follows the normative definition', () => {
    fc.assert(
      fc.property(weightsArb, fc.integer({ min: 0, max: 0x7fffffff }), (weights, start) => {
        const p = new Partition(weights);
        for (let slot = start; slot < start + 50; slot++) {
          const want = refOwner(weights, slot);
          if (p.owner(slot) !== want)
            throw new Error(`weights ${weights} slot ${slot}: owner ${p.owner(slot)}, want ${want}`);
        }
      }),
      { seed: 42, numRuns: 200 },
    );
  });

  test('shares of a long run of slots are within 2% of the weights', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 32 }), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 0, max: 0x7fffffff }),
        fc.integer({ min: 2000, max: 10_000 }),
        (weights, start, length) => {
          const p = new Partition(weights);
          const total = weights.reduce((a, b) => a + b, 0);
          const counts = new Array<number>(weights.length).fill(0);
          for (let slot = start; slot < start + length; slot++) counts[p.owner(slot)]++;
          weights.forEach((w, i) => {
            const want = total === 0 ? 1 / weights.length : w / total;
            const got = counts[i] / length;
            if (Math.abs(got - want) > 0.02)
              throw new Error(
                `weights ${weights}: source ${i} got ${got.toFixed(4)} of the slots, weight ${want.toFixed(4)}`,
              );
            if (w === 0 && total > 0 && counts[i] > 0) throw new Error(`zero weight ${i} owns ${counts[i]} slots`);
          });
        },
      ),
      { seed: 42, numRuns: 100 },
    );
  });

  test('all-zero weights mean equal shares', () => {
    for (const n of [1, 2, 3, 7, 32]) {
      const zero = new Partition(new Array<number>(n).fill(0));
      const equal = Partition.equal(n);
      const counts = new Array<number>(n).fill(0);
      for (let slot = 0; slot < 20_000; slot++) {
        const o = zero.owner(slot);
        if (o !== equal.owner(slot))
          throw new Error(`slot ${slot}: owner ${o} with zero weights, ${equal.owner(slot)} equal`);
        counts[o]++;
      }
      for (const c of counts) expect(Math.abs(c / 20_000 - 1 / n)).toBeLessThan(0.02);
    }
  });

  test('a single source owns every slot', () => {
    const p = new Partition([7]);
    for (let slot = 0; slot < 1000; slot++) if (p.owner(slot) !== 0) throw new Error(`slot ${slot} not owned by 0`);
  });
});
