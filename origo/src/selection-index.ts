/**
 * Selection (selection.ts, rules 1-6) without walking the fleet per request (issue 34).
 *
 * `selectProxies` reads every proxy for every request: eligibility, two medians, a score each,
 * the first group. This index keeps what those need, updated when a proxy changes (`upsert`,
 * `remove`), so a request touches about as many proxies as it asks for:
 *
 * - a *view* per (mode, region filter) a request used (all, near a region, far from it), holding
 *   its eligible proxies: an array to draw uniformly from, the claimed free capacities and the
 *   measured throughputs sorted (the medians, less the excluded proxies' values, in O(excluded)),
 *   and three lists sorted by how they score: measured (by their score), claiming (by free
 *   capacity / load: an upper bound of their capped score) and unknown capacity (by load);
 * - each group (rule 4) starts at the best score below the groups before it, found from the
 *   heads of those lists; it is listed when the places left hold it, else sampled by rejection
 *   from the prefixes of the lists that can reach its floor (the same uniform ordered sample as
 *   the shuffle of rule 4), so a request reads about as many proxies as it asks for;
 * - the declared client prefixes in a table by (family, length, network): clientRegion looks up
 *   one entry per declared prefix length.
 *
 * It picks with the same rules and the same frequencies as selectProxies (a seeded statistical
 * test compares them, selection-index.test.ts), not the same random draws. A change costs a binary
 * search and an array splice per view holding the proxy (a memmove: linear, but some microseconds
 * at 10,000 proxies); views are made on first use and at most MAX_VIEWS are kept.
 */
import { Random, randomBelow } from '@mutp/shared';
import {
  MIN_HINTED_REGION_PROXIES,
  NEAR_EQUAL_FRACTION,
  ProxyLoad,
  SelectableMode,
  SelectionRequest,
} from './selection';
import { PrefixTable } from './prefix-table';
import { operatorKey, spreadOverOperators } from './operator-spread';

/** Views kept at once (mode × region filter); the least recently used goes beyond. */
export const MAX_VIEWS = 64;
/** Below this many candidates, the first group is listed instead of sampled by rejection. */
const SMALL_GROUP = 32;
/** Changes in one resync beyond which the views are made again rather than updated. */
const BULK_CHANGES = 64;
/** Rejected draws per place before the candidates are listed instead. */
const MAX_REJECTIONS = 64;

/** A proxy as indexed: the values its positions were computed from (the proxy object may change). */
interface Slot<P> {
  proxy: P;
  /** Unique, orders equal keys. */
  seq: number;
  modes: ReadonlySet<SelectableMode>;
  region?: string;
  /** The client prefixes it declared for its region (clientRegion), as indexed. */
  prefixes?: readonly string[];
  eligible: boolean;
  /** Free claimed capacity when it claims one (capacityBps > 0), else -1. */
  free: number;
  measured?: number;
  /** 1 + activeTransfers + recentPicks: the score's divisor. */
  divisor: number;
  /** The sort key in its class list (descending): measured score, free / divisor, or 1 / divisor. */
  key: number;
}

type Field = 'free' | 'measured' | 'key';

/** Slots sorted by a numeric field, ascending or descending, equal values by seq. */
class SortedSlots<P> {
  readonly items: Slot<P>[] = [];
  constructor(
    private readonly field: Field,
    private readonly descending: boolean,
  ) {}

  private before(a: Slot<P>, value: number, seq: number): boolean {
    const v = a[this.field]!;
    if (v !== value) return this.descending ? v > value : v < value;
    return a.seq < seq;
  }

  private position(slot: Slot<P>): number {
    const value = slot[this.field]!;
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.before(this.items[mid], value, slot.seq)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Fills an empty list at once (one sort instead of an insertion each). */
  build(slots: Slot<P>[]): void {
    const field = this.field;
    const sign = this.descending ? -1 : 1;
    this.items.push(...slots);
    this.items.sort((a, b) => (a[field] === b[field] ? a.seq - b.seq : a[field]! < b[field]! ? -sign : sign));
  }

  insert(slot: Slot<P>): void {
    this.items.splice(this.position(slot), 0, slot);
  }

  remove(slot: Slot<P>): void {
    const at = this.position(slot);
    if (this.items[at] !== slot) throw new Error(`selection index: ${this.field} list lost a proxy`);
    this.items.splice(at, 1);
  }

  /** How many leading items satisfy `holds` (true on a prefix, then false). */
  prefix(holds: (slot: Slot<P>) => boolean): number {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (holds(this.items[mid])) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** The eligible proxies one kind of request selects from. */
class View<P> {
  readonly members: Slot<P>[] = [];
  readonly at = new Map<Slot<P>, number>();
  readonly free = new SortedSlots<P>('free', false);
  readonly measured = new SortedSlots<P>('measured', false);
  /** Measured proxies by score, those claiming a capacity by free / divisor, the others by 1 / divisor. */
  readonly classes = [
    new SortedSlots<P>('key', true),
    new SortedSlots<P>('key', true),
    new SortedSlots<P>('key', true),
  ] as const;

  constructor(readonly accepts: (slot: Slot<P>) => boolean) {}

  /** Fills an empty view. */
  build(slots: Slot<P>[]): void {
    for (const slot of slots) {
      this.at.set(slot, this.members.length);
      this.members.push(slot);
    }
    this.free.build(slots.filter((s) => s.free >= 0));
    this.measured.build(slots.filter((s) => s.measured !== undefined));
    for (const c of [0, 1, 2] as const) this.classes[c].build(slots.filter((s) => classOf(s) === c));
  }

  add(slot: Slot<P>): void {
    this.at.set(slot, this.members.length);
    this.members.push(slot);
    if (slot.free >= 0) this.free.insert(slot);
    if (slot.measured !== undefined) this.measured.insert(slot);
    this.classes[classOf(slot)].insert(slot);
  }

  delete(slot: Slot<P>): void {
    const i = this.at.get(slot)!;
    const last = this.members.pop()!;
    if (last !== slot) {
      this.members[i] = last;
      this.at.set(last, i);
    }
    this.at.delete(slot);
    if (slot.free >= 0) this.free.remove(slot);
    if (slot.measured !== undefined) this.measured.remove(slot);
    this.classes[classOf(slot)].remove(slot);
  }
}

/** Whether two slots of one proxy index it alike (the proxy object aside). */
function sameSlot(a: Slot<unknown>, b: Slot<unknown>): boolean {
  return (
    a.eligible === b.eligible &&
    a.free === b.free &&
    a.measured === b.measured &&
    a.divisor === b.divisor &&
    a.region === b.region &&
    sameList(a.prefixes, b.prefixes) &&
    a.modes.size === b.modes.size &&
    [...a.modes].every((m) => b.modes.has(m))
  );
}

function sameList(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.length === b.length && a.every((x, i) => x === b[i]));
}

function classOf(slot: Slot<unknown>): 0 | 1 | 2 {
  return slot.measured !== undefined ? 0 : slot.free >= 0 ? 1 : 2;
}

type RegionFilter = 'all' | 'near' | 'far';

export class SelectionIndex<P extends ProxyLoad> {
  private readonly slots = new Map<string, Slot<P>>();
  /** By `${mode}|${filter}|${region}`, least recently used first. */
  private readonly views = new Map<string, View<P>>();
  /** Eligible proxies per `${mode}|${region}` (hinted regions). */
  private readonly regionCounts = new Map<string, number>();
  private readonly prefixes = new PrefixTable();
  private seq = 0;

  get size(): number {
    return this.slots.size;
  }

  has(proxyId: string): boolean {
    return this.slots.has(proxyId);
  }

  /**
   * Adds a proxy, or reads again everything selection uses of one already indexed (moved only
   * when something selection reads changed).
   */
  upsert(proxy: P): void {
    const old = this.slots.get(proxy.proxyId);
    const slot = this.slotOf(proxy, old);
    if (old !== undefined && sameSlot(old, slot)) {
      old.proxy = proxy;
      return;
    }
    // Its declared prefixes move only when they changed (a heartbeat changes the load alone).
    const samePrefixes = old !== undefined && old.region === slot.region && sameList(old.prefixes, slot.prefixes);
    if (old !== undefined) this.detach(old, !samePrefixes);
    this.slots.set(proxy.proxyId, slot);
    this.attach(slot, !samePrefixes);
  }

  /**
   * Makes the index hold exactly `proxies`. Many changes at once (a registry read that changed
   * every proxy's picks) drop the views, made again (sorted once) on their next use, instead of
   * moving each proxy in each.
   */
  resync(proxies: Iterable<P>): void {
    const seen = new Set<string>();
    const changed: P[] = [];
    for (const proxy of proxies) {
      seen.add(proxy.proxyId);
      const old = this.slots.get(proxy.proxyId);
      if (old !== undefined && sameSlot(old, this.slotOf(proxy, old))) old.proxy = proxy;
      else changed.push(proxy);
    }
    const gone = [...this.slots.keys()].filter((id) => !seen.has(id));
    if (changed.length + gone.length > BULK_CHANGES) this.views.clear();
    for (const id of gone) this.remove(id);
    for (const proxy of changed) this.upsert(proxy);
  }

  private slotOf(proxy: P, old: Slot<P> | undefined): Slot<P> {
    const free = proxy.capacityBps > 0 ? Math.max(0, proxy.capacityBps - proxy.uploadBps) : -1;
    const divisor = 1 + proxy.activeTransfers + (proxy.recentPicks ?? 0);
    const measured = proxy.measuredBps;
    return {
      proxy,
      seq: old?.seq ?? this.seq++,
      modes: proxy.modes,
      ...(proxy.region !== undefined ? { region: proxy.region } : {}),
      ...(proxy.region !== undefined && proxy.prefixes !== undefined ? { prefixes: proxy.prefixes } : {}),
      eligible: proxy.activeTransfers < proxy.maxTransfers && proxy.draining !== true,
      free,
      ...(measured !== undefined ? { measured } : {}),
      divisor,
      key: measured !== undefined ? measured / divisor : free >= 0 ? free / divisor : 1 / divisor,
    };
  }

  remove(proxyId: string): void {
    const slot = this.slots.get(proxyId);
    if (slot === undefined) return;
    this.detach(slot);
    this.slots.delete(proxyId);
  }

  /** selectProxies over the indexed proxies. */
  select(request: SelectionRequest, random: Random): P[] {
    return spreadOverOperators(
      request,
      (r) => this.selectByLoad(r, random),
      (operators) => {
        const ids: string[] = [];
        for (const [id, slot] of this.slots) if (operators.has(operatorKey(slot.proxy))) ids.push(id);
        return ids;
      },
    );
  }

  /** Rules 1-6 (selection.ts). */
  private selectByLoad(request: SelectionRequest, random: Random): P[] {
    const excluded = this.excludedSlots(request.exclude);
    const all = this.view(request.mode, 'all', '');
    const eligible = all.members.length - countIn(all, excluded);
    if (eligible === 0 || request.count <= 0) return [];
    const region = request.region ?? this.hintedRegion(request.mode, request.regionHint, excluded);
    if (region === undefined) return this.rank(all, excluded, request.count, random);
    const near = this.view(request.mode, 'near', region);
    const nearCount = near.members.length - countIn(near, excluded);
    const far = this.view(request.mode, 'far', region);
    const farCount = far.members.length - countIn(far, excluded);
    if (nearCount >= request.count || farCount === 0) return this.rank(near, excluded, request.count, random);
    return [
      ...this.rank(near, excluded, nearCount, random),
      ...this.rank(far, excluded, request.count - nearCount, random),
    ];
  }

  /** clientRegion over the indexed proxies. */
  clientRegion(address: string): string | undefined {
    return this.prefixes.regionOf(address);
  }

  private attach(slot: Slot<P>, prefixes = true): void {
    if (prefixes && slot.prefixes !== undefined) this.prefixes.add(slot.region!, slot.prefixes);
    if (!slot.eligible) return;
    for (const view of this.views.values()) if (view.accepts(slot)) view.add(slot);
    if (slot.region !== undefined)
      for (const key of regionKeys(slot)) this.regionCounts.set(key, (this.regionCounts.get(key) ?? 0) + 1);
  }

  private detach(slot: Slot<P>, prefixes = true): void {
    if (prefixes && slot.prefixes !== undefined) this.prefixes.delete(slot.region!, slot.prefixes);
    if (!slot.eligible) return;
    for (const view of this.views.values()) if (view.at.has(slot)) view.delete(slot);
    if (slot.region === undefined) return;
    for (const key of regionKeys(slot)) {
      const left = this.regionCounts.get(key)! - 1;
      if (left === 0) this.regionCounts.delete(key);
      else this.regionCounts.set(key, left);
    }
  }

  private view(mode: SelectableMode | undefined, filter: RegionFilter, region: string): View<P> {
    const name = `${mode ?? '*'}|${filter}|${region}`;
    let view = this.views.get(name);
    if (view !== undefined) {
      this.views.delete(name); // most recently used last
      this.views.set(name, view);
      return view;
    }
    view = new View<P>((slot) => {
      if (mode !== undefined && !slot.modes.has(mode)) return false;
      if (filter === 'all') return true;
      const near = slot.region === undefined || slot.region === region;
      return filter === 'near' ? near : !near;
    });
    view.build([...this.slots.values()].filter((slot) => slot.eligible && view.accepts(slot)));
    this.views.set(name, view);
    if (this.views.size > MAX_VIEWS) this.views.delete(this.views.keys().next().value!);
    return view;
  }

  private excludedSlots(exclude: readonly string[] | undefined): Slot<P>[] {
    if (exclude === undefined || exclude.length === 0) return [];
    const found: Slot<P>[] = [];
    for (const id of new Set(exclude)) {
      const slot = this.slots.get(id);
      if (slot !== undefined && slot.eligible) found.push(slot);
    }
    return found;
  }

  private hintedRegion(
    mode: SelectableMode | undefined,
    hint: string | undefined,
    excluded: readonly Slot<P>[],
  ): string | undefined {
    if (hint === undefined) return undefined;
    let declared = this.regionCounts.get(`${mode ?? '*'}|${hint}`) ?? 0;
    for (const slot of excluded) if (slot.region === hint && (mode === undefined || slot.modes.has(mode))) declared--;
    return declared >= MIN_HINTED_REGION_PROXIES ? hint : undefined;
  }

  /** selection.ts `rank` (rules 2-5) over a view less the excluded proxies. */
  private rank(view: View<P>, excludedAll: readonly Slot<P>[], count: number, random: Random): P[] {
    const excluded = new Set(excludedAll.filter((s) => view.at.has(s)));
    const eligible = view.members.length - excluded.size;
    if (eligible <= 0 || count <= 0) return [];
    const scorer = this.scorer(view, excluded);
    const drawn = count >= 2 && eligible > count;
    const ranked = drawn ? count - 1 : count;
    const top = this.groups(scorer, ranked, random);
    if (!drawn) return top.map((s) => s.proxy);
    // Rule 5: uniform over the eligible proxies not ranked in (rejection: most are not).
    const taken = new Set(top);
    for (let tries = 0; tries < MAX_REJECTIONS * count; tries++) {
      const pick = view.members[randomBelow(random, view.members.length)];
      if (!excluded.has(pick) && !taken.has(pick)) return [...top, pick].map((s) => s.proxy);
    }
    const rest = view.members.filter((s) => !excluded.has(s) && !taken.has(s));
    return [...top, rest[randomBelow(random, rest.length)]].map((s) => s.proxy);
  }

  /**
   * Rule 4: the groups in score order, each shuffled, until `ranked` places are filled. A group is
   * found from its start (the best score below the groups before it) and read from the list
   * prefixes that can reach its floor: listed when it fits in the places left, else sampled by
   * rejection (the same uniform ordered sample as shuffling it and taking the first).
   */
  private groups(scorer: Scorer<P>, ranked: number, random: Random): Slot<P>[] {
    const ordered: Slot<P>[] = [];
    let above = Infinity; // the floor of the groups taken: they hold every score from there up
    let start = scorer.bestBelow(above);
    while (ordered.length < ranked && start > -Infinity) {
      const floor = start * (1 - NEAR_EQUAL_FRACTION);
      const bound = above;
      const inGroup = (slot: Slot<P>) => {
        if (scorer.excluded.has(slot)) return false;
        const score = scorer.score(slot);
        return score >= floor && score < bound;
      };
      const prefixes = scorer.prefixes(floor);
      const need = ranked - ordered.length;
      const members = listed(prefixes, inGroup, need + 1);
      if (members.length <= need) ordered.push(...orderedSample(members, members.length, random));
      else ordered.push(...sampleOf(prefixes, inGroup, need, random));
      above = floor;
      start = scorer.bestBelow(above);
    }
    return ordered;
  }

  private scorer(view: View<P>, excluded: ReadonlySet<Slot<P>>): Scorer<P> {
    return new Scorer(view, excluded);
  }
}

/** Scores (rules 2-3) of a view's proxies for one request: its medians less the excluded proxies. */
class Scorer<P> {
  /** Median free claimed capacity (the prior of a proxy of unknown capacity). */
  readonly unknownFree: number;
  /** Median measured throughput (the cap of a claim). */
  readonly priorCap: number;

  constructor(
    private readonly view: View<P>,
    readonly excluded: ReadonlySet<Slot<P>>,
  ) {
    const out = [...excluded];
    this.unknownFree =
      medianLess(
        view.free,
        'free',
        out.filter((s) => s.free >= 0),
      ) ?? 1;
    this.priorCap =
      medianLess(
        view.measured,
        'measured',
        out.filter((s) => s.measured !== undefined),
      ) ?? Infinity;
  }

  score(slot: Slot<P>): number {
    const claimed = Math.min(this.priorCap, slot.free >= 0 ? slot.free : this.unknownFree);
    return (slot.measured ?? claimed) / slot.divisor;
  }

  /** The best score below `bound` of the view's eligible proxies (-Infinity: none). */
  bestBelow(bound: number): number {
    let best = -Infinity;
    const [measured, claiming, unknown] = this.view.classes;
    // Measured and unknown capacities score in list order: the first one below the bound is best.
    const firstFrom = (list: SortedSlots<P>, from: number) => {
      for (let i = from; i < list.items.length; i++)
        if (!this.excluded.has(list.items[i])) return this.score(list.items[i]);
      return -Infinity;
    };
    best = Math.max(
      firstFrom(
        measured,
        measured.prefix((s) => s.key >= bound),
      ),
      firstFrom(
        unknown,
        unknown.prefix((s) => this.unknownScore(s) >= bound),
      ),
    );
    // A claim scores at most its key (free / divisor): above the bound, only a capped one may be
    // below it; below, none further down can beat `best`.
    const from = claiming.prefix((s) => s.key >= bound);
    for (let i = 0; i < from; i++) {
      const slot = claiming.items[i];
      const score = this.excluded.has(slot) ? -Infinity : this.score(slot);
      if (score < bound) best = Math.max(best, score);
    }
    for (let i = from; i < claiming.items.length; i++) {
      const slot = claiming.items[i];
      if (slot.key <= best) break;
      if (!this.excluded.has(slot)) best = Math.max(best, this.score(slot));
    }
    return best;
  }

  /** The score of a proxy of unknown capacity: one numerator for all, so it falls along their list. */
  private unknownScore(slot: Slot<P>): number {
    return Math.min(this.priorCap, this.unknownFree) / slot.divisor;
  }

  /** Per class, the leading proxies that may score `threshold` or more (a superset: filter by score). */
  prefixes(threshold: number): Prefix<P>[] {
    const [measured, claiming, unknown] = this.view.classes;
    return [
      { items: measured.items, length: measured.prefix((s) => s.key >= threshold) },
      { items: claiming.items, length: claiming.prefix((s) => s.key >= threshold) },
      { items: unknown.items, length: unknown.prefix((s) => this.unknownScore(s) >= threshold) },
    ];
  }
}

/** The first `length` items of a sorted list (not copied: requests read far fewer than that). */
interface Prefix<P> {
  items: readonly Slot<P>[];
  length: number;
}

/** The items of the prefixes that `keep` keeps, at most `most` of them. */
function listed<P>(prefixes: readonly Prefix<P>[], keep: (slot: Slot<P>) => boolean, most = Infinity): Slot<P>[] {
  const out: Slot<P>[] = [];
  for (const p of prefixes)
    for (let i = 0; i < p.length && out.length < most; i++) if (keep(p.items[i])) out.push(p.items[i]);
  return out;
}

/**
 * A uniform ordered sample of `count` of the prefixes' items that `keep` keeps (more than
 * `count` of them): each drawn by rejection from the prefixes, or from the list of those left
 * when most draws are rejected (excluded, capped, in another group or taken).
 */
function sampleOf<P>(
  prefixes: readonly Prefix<P>[],
  keep: (slot: Slot<P>) => boolean,
  count: number,
  random: Random,
): Slot<P>[] {
  const total = prefixes.reduce((sum, p) => sum + p.length, 0);
  if (total <= SMALL_GROUP) return orderedSample(listed(prefixes, keep), count, random);
  const chosen: Slot<P>[] = [];
  const taken = new Set<Slot<P>>();
  while (chosen.length < count) {
    let pick: Slot<P> | undefined;
    for (let tries = 0; tries < MAX_REJECTIONS && pick === undefined; tries++) {
      const slot = nth(prefixes, randomBelow(random, total));
      if (keep(slot) && !taken.has(slot)) pick = slot;
    }
    if (pick === undefined) {
      const left = listed(prefixes, (s) => keep(s) && !taken.has(s));
      pick = left[randomBelow(random, left.length)];
    }
    chosen.push(pick);
    taken.add(pick);
  }
  return chosen;
}

/** The median of a sorted list's `field` less some of its members' values (undefined: none left). */
function medianLess<P>(list: SortedSlots<P>, field: 'free' | 'measured', less: Slot<P>[]): number | undefined {
  const n = list.items.length - less.length;
  if (n <= 0) return undefined;
  const removed = less.map((s) => s[field]!).sort((a, b) => a - b);
  const kth = (k: number) => {
    let i = k;
    for (const r of removed) if (r <= list.items[i][field]!) i++;
    return list.items[i][field]!;
  };
  const mid = n >> 1;
  return n % 2 === 1 ? kth(mid) : (kth(mid - 1) + kth(mid)) / 2;
}

/** A uniform random ordered sample of `count` of `items` (partial Fisher–Yates on a copy). */
function orderedSample<T>(items: readonly T[], count: number, random: Random): T[] {
  const pool = [...items];
  for (let i = 0; i < count; i++) {
    const j = i + randomBelow(random, pool.length - i);
    [pool[i], pool[j]] = [pool[j], pool[i]];
  }
  return pool.slice(0, count);
}

/** The `i`-th item of the prefixes taken one after the other. */
function nth<P>(prefixes: readonly Prefix<P>[], i: number): Slot<P> {
  for (const p of prefixes) {
    if (i < p.length) return p.items[i];
    i -= p.length;
  }
  throw new RangeError('selection index: draw beyond the candidates');
}

function countIn<P>(view: View<P>, slots: readonly Slot<P>[]): number {
  let n = 0;
  for (const s of slots) if (view.at.has(s)) n++;
  return n;
}

/** The `${mode}|${region}` counters an eligible proxy with a region adds to. */
function regionKeys(slot: Slot<unknown>): string[] {
  return ['*', ...slot.modes].map((mode) => `${mode}|${slot.region}`);
}
