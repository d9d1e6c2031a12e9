/**
 * The staging decision (SoftStage §III-D, seed 000) against its rule with measured inputs:
 * N = ceil((RTT_edge + L_stage) / L_fetch) staged ahead, one until measured, never past maxAhead.
 */
import fc from 'fast-check';
import { SegmentRef, StagingManager } from '../src/client';

const seg = (i: number): SegmentRef => ({ url: `https://media.example/seg${i}.ts` });
const list = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => seg(from + i));
const urls = (refs: SegmentRef[]) => refs.map((r) => r.url.replace('https://media.example/', ''));

/** Orders what decide() asks at `now`, and stages each after `stageMs` (origin part `originMs`). */
function orderAndStage(m: StagingManager, now: number, stageMs: number, originMs: number): SegmentRef[] {
  const orders = m.decide(now);
  for (const s of orders) {
    m.stageOrdered(s, now);
    m.staged(s, 'p1', now + stageMs, originMs);
  }
  return orders;
}

/** Fetches segment i (already staged) in `fetchMs`. */
function fetch(m: StagingManager, i: number, at: number, fetchMs: number): void {
  m.fetchStarted(seg(i), at);
  m.fetchCompleted(seg(i), at + fetchMs);
}

/** Segment 0 staged in 940 ms (origin 900, RTT 40) and fetched in `fetchMs`; 20 segments listed. */
function measured(fetchMs: number, maxAhead = 8): StagingManager {
  const m = new StagingManager({ maxAhead });
  m.setUpcoming(list(0, 20));
  orderAndStage(m, 0, 940, 900);
  fetch(m, 0, 1000, fetchMs);
  return m;
}

describe('StagingManager', () => {
  test('before any measurement it stages exactly one segment ahead', () => {
    const m = new StagingManager();
    m.setUpcoming(list(0, 20));
    expect(urls(m.decide(0))).toEqual(['seg0.ts']);
    m.stageOrdered(seg(0), 0);
    // Ordered and not answered yet: nothing more.
    expect(m.decide(10)).toEqual([]);
    expect(m.stats().neededAhead).toBe(1);
  });

  test('with measured latencies it keeps ceil((RTT + L_stage) / L_fetch) staged ahead', () => {
    const m = new StagingManager({ maxAhead: 8 });
    m.setUpcoming(list(0, 20));
    // Staging takes 940 ms of which the origin fetch is 900 (RTT 40); a staged fetch takes 400 ms.
    orderAndStage(m, 0, 940, 900);
    fetch(m, 0, 1000, 400);
    expect(m.stats()).toMatchObject({ fetchMs: 400, stagingLatencyMs: 900, edgeRttMs: 40 });
    // (40 + 900) / 400 = 2.35 -> 3 staged ahead of the fetched segment 0.
    expect(m.neededAhead()).toBe(3);
    expect(urls(m.decide(1400))).toEqual(['seg1.ts', 'seg2.ts', 'seg3.ts']);
  });

  test('a faster edge link needs more staged ahead, a slower one fewer', () => {
    const fast = measured(200);
    expect(fast.neededAhead()).toBe(5); // 940 / 200 = 4.7

    const slow = measured(2000);
    expect(slow.neededAhead()).toBe(1);
  });

  test('never more than maxAhead, however fast the fetches', () => {
    const m = new StagingManager({ maxAhead: 3 });
    m.setUpcoming(list(0, 20));
    orderAndStage(m, 0, 5000, 4960);
    fetch(m, 0, 6000, 10);
    expect(m.neededAhead()).toBe(3);
    expect(urls(m.decide(6010))).toEqual(['seg1.ts', 'seg2.ts', 'seg3.ts']);
  });

  test('READY and PENDING segments ahead count; only the shortfall is ordered', () => {
    const m = measured(400);
    const first = m.decide(1400);
    first.forEach((s) => m.stageOrdered(s, 1400));
    m.staged(seg(1), 'p1', 2300, 860);
    expect(m.decide(2300)).toEqual([]);
    // Segment 1 is fetched: one more is needed to stay 3 ahead.
    fetch(m, 1, 2400, 400);
    expect(urls(m.decide(2800))).toEqual(['seg4.ts']);
  });

  test('an unanswered order goes out again after the timeout, at most maxOrders in all', () => {
    const m = new StagingManager({ stageTimeoutMs: 1000, maxOrders: 2 });
    m.setUpcoming(list(0, 5));
    m.stageOrdered(seg(0), 0);
    expect(m.decide(999)).toEqual([]);
    expect(urls(m.decide(1000))).toEqual(['seg0.ts']);
    m.stageOrdered(seg(0), 1000);
    // Two orders unanswered: segment 0 is left to the fetch; the next one is staged instead.
    expect(urls(m.decide(2000))).toEqual(['seg1.ts']);
  });

  test('a failed stage returns the segment to NONE unless another proxy holds it', () => {
    const m = new StagingManager();
    m.setUpcoming(list(0, 5));
    m.stageOrdered(seg(0), 0);
    m.staged(seg(0), 'p1', 100, 80);
    m.staged(seg(0), 'p2', 120, 90);
    m.stageFailed(seg(0), 'p1');
    expect(m.profile(seg(0))).toMatchObject({ staging: 'ready', holders: ['p2'] });
    m.stageFailed(seg(0), 'p2');
    expect(m.profile(seg(0))?.staging).toBe('none');
    expect(urls(m.decide(200))).toEqual(['seg0.ts']);
  });

  test('a seek replaces the playlist: what was staged and left unfetched counts as wasted', () => {
    const m = measured(400);
    orderAndStage(m, 1400, 940, 900); // segments 1..3 staged
    m.setUpcoming(list(10, 30));
    expect(m.stats().wasted).toBe(3);
    // Measurements carry over: the new position gets its N at once.
    expect(urls(m.decide(3000))).toEqual(['seg10.ts', 'seg11.ts', 'seg12.ts']);
    // A refresh that keeps the segments keeps their state (nothing wasted, nothing re-ordered).
    m.decide(3000).forEach((s) => m.stageOrdered(s, 3000));
    m.setUpcoming(list(10, 31));
    expect(m.stats().wasted).toBe(3);
    expect(m.decide(3100)).toEqual([]);
    // A staged segment whose download started and was abandoned (the player seeked) was asked for.
    m.fetchStarted(seg(10), 3200);
    m.setUpcoming(list(20, 31));
    expect(m.stats().wasted).toBe(5); // 11 and 12, not 10
  });

  test('segments are told apart by range', () => {
    const m = new StagingManager();
    const a = { url: 'https://media.example/v.mp4', range: { start: 0, length: 1000 } };
    const b = { url: 'https://media.example/v.mp4', range: { start: 1000, length: 1000 } };
    m.setUpcoming([a, b]);
    m.stageOrdered(a, 0);
    m.staged(a, 'p1', 50, 40);
    m.fetchStarted(a, 60);
    m.fetchCompleted(a, 100);
    expect(m.decide(100)).toEqual([b]);
    // The one after a (where a handoff during a stages first), by range too.
    expect(m.after(a)).toEqual(b);
    expect(m.after(b)).toBeUndefined();
    expect(m.after({ url: a.url })).toBeUndefined();
  });

  test('property: decide() orders only listed, unfetched, unstaged segments, and never past maxAhead', () => {
    type Event =
      | { kind: 'decide' }
      | { kind: 'staged'; i: number; ms: number; origin: number }
      | { kind: 'fail'; i: number }
      | { kind: 'fetch'; i: number; ms: number }
      | { kind: 'seek'; to: number }
      | { kind: 'advance'; ms: number };
    const event: fc.Arbitrary<Event> = fc.oneof(
      fc.constant({ kind: 'decide' as const }),
      fc.record({ kind: fc.constant('staged' as const), i: fc.nat(30), ms: fc.nat(3000), origin: fc.nat(3000) }),
      fc.record({ kind: fc.constant('fail' as const), i: fc.nat(30) }),
      fc.record({ kind: fc.constant('fetch' as const), i: fc.nat(30), ms: fc.nat(3000) }),
      fc.record({ kind: fc.constant('seek' as const), to: fc.nat(20) }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.nat(20_000) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(event, { maxLength: 60 }), (maxAhead, events) => {
        const m = new StagingManager({ maxAhead, stageTimeoutMs: 5000 });
        let position = 0;
        let now = 0;
        m.setUpcoming(list(0, 30));
        for (const e of events) {
          if (e.kind === 'advance') now += e.ms;
          else if (e.kind === 'seek') m.setUpcoming(list((position = e.to), 30));
          else if (e.kind === 'fail') m.stageFailed(seg(e.i), 'p1');
          else if (e.kind === 'staged') m.staged(seg(e.i), 'p1', now + e.ms, e.origin);
          else if (e.kind === 'fetch') {
            m.fetchStarted(seg(e.i), now);
            m.fetchCompleted(seg(e.i), now + e.ms);
          } else {
            const orders = m.decide(now);
            const unfetched = list(position, 30).filter((s) => !m.profile(s)?.fetched);
            const window = new Set(unfetched.slice(0, maxAhead).map((s) => s.url));
            for (const s of orders) {
              const p = m.profile(s);
              if (!p || p.fetched || !window.has(s.url)) return false;
              const live = p.staging === 'ready' || (p.staging === 'pending' && now - (p.orderedAt ?? 0) < 5000);
              if (live) return false;
              m.stageOrdered(s, now);
            }
            if (orders.length > maxAhead) return false;
          }
        }
        return true;
      }),
      { seed: 1312, numRuns: 300 },
    );
  });
});
