/**
 * Stateless staging (SoftStage, docs/signalling.md "Staging hints"): origo forwards a client's
 * hint, the proxy fetches the object into its cache as any download would (same URL policy, same
 * origin limits, same memory budget) and answers `staged` with how long the origin took, or
 * `failed` with why. Nothing about the client is kept: the hint's ids travel back in the answer,
 * and the cache entry is what a later REQUEST (from whichever client) finds.
 *
 * A hint costs an origin fetch and cache space without anyone downloading yet, so hints under way
 * are capped in all and per client network; past a cap the hint is answered 'busy' at once (the
 * client then fetches on demand, as without staging). A network whose fetches already cost the
 * origin more than its completed downloads earn (`HintLedger`) gets 'over-budget' for objects the
 * cache does not hold. A fetch that outlives `timeoutMs` is withdrawn.
 *
 * A hint that names the layout its client will REQUEST with also gets the object's encoder and
 * digests prepared (`prepare`) before the answer; a layout that cannot be prepared leaves the
 * object staged all the same (the REQUEST then does that work, as without the layout).
 */
import type { StagedByProxy, StageHint } from '@mutp/shared';
import type { Logger } from 'pino';
import { EncoderBudgetError, shareKey } from '@mutp/shared';
import { asServeError } from './errors';
import type { ProxyMetrics } from './metrics';
import type { CachedObject } from './object-cache';
import type { ObjectSource } from './object-source';
import { LayoutRefused, PrepareStaged } from './stage-prepare';
import type { HintLedger } from './hint-ledger';

export interface StagerOptions {
  objects: Pick<ObjectSource, 'get' | 'isCached' | 'lookupsOf' | 'dropIfUnrequested'>;
  send(answer: StagedByProxy): void;
  metrics: ProxyMetrics;
  logger: Logger;
  /** Hints fetching at once, all clients together. */
  maxConcurrent: number;
  /** Hints fetching at once for one client network (one client when origo names no network). */
  maxPerClient: number;
  /** A staging fetch still running after this long is withdrawn ('timeout'). */
  timeoutMs: number;
  /** The proxy is draining: hints are answered 'draining' (it takes no new work). */
  draining?: () => boolean;
  /** Readies a staged object for the layout a hint names (stage-prepare.ts); absent: not done. */
  prepare?: PrepareStaged;
  /** What each network's hints may still cost the origin; absent: no byte budget. */
  ledger?: HintLedger;
  /**
   * An object a hint fetched that no lookup asked for within this long leaves the cache (its
   * space goes to objects someone wants). Default DEFAULT_UNREQUESTED_HOLD_MS.
   */
  unrequestedHoldMs?: number;
  clock?: () => number;
}

export const DEFAULT_MAX_STAGING = 16;
/** A staged segment is asked for within a few segment durations, or not at all. */
export const DEFAULT_UNREQUESTED_HOLD_MS = 60_000;
export const DEFAULT_MAX_STAGING_PER_CLIENT = 4;

export class Stager {
  private readonly running = new Map<string, number>();
  private active = 0;
  private readonly abort = new AbortController();
  /** Timers that drop staged objects nobody asked for (cleared on close). */
  private readonly holds = new Set<NodeJS.Timeout>();
  private readonly clock: () => number;
  private readonly log: Logger;

  constructor(private readonly options: StagerOptions) {
    this.clock = options.clock ?? (() => performance.now());
    this.log = options.logger.child({ component: 'stager' });
  }

  /** Hints fetching now (stats). */
  get inFlight(): number {
    return this.active;
  }

  handle(hint: StageHint): void {
    // Hints count per client network (origo's word): client ids are free.
    const network = shareKey(hint.clientId, hint.clientNetwork);
    const mine = this.running.get(network) ?? 0;
    if (this.abort.signal.aborted) return this.answer(hint, 'failed', 'closing');
    if (this.options.draining?.() === true) return this.answer(hint, 'failed', 'draining');
    if (this.active >= this.options.maxConcurrent || mine >= this.options.maxPerClient) {
      return this.answer(hint, 'failed', 'busy');
    }
    const ledger = this.options.ledger;
    if (ledger && !ledger.mayStage(network, this.clock()) && !this.options.objects.isCached(hint.url, hint.range)) {
      return this.answer(hint, 'failed', 'over-budget');
    }
    this.active++;
    this.running.set(network, mine + 1);
    void this.stage(hint, network).finally(() => {
      this.active--;
      const left = (this.running.get(network) ?? 1) - 1;
      if (left > 0) this.running.set(network, left);
      else this.running.delete(network);
    });
  }

  /** Withdraws every staging fetch (the proxy is closing). */
  close(): void {
    this.abort.abort();
    for (const timer of this.holds) clearTimeout(timer);
    this.holds.clear();
  }

  /** Drops the object this hint fetched unless a lookup asks for it within the hold time. */
  private holdForRequests(object: CachedObject): void {
    const { objects } = this.options;
    const seen = objects.lookupsOf(object);
    const timer = setTimeout(() => {
      this.holds.delete(timer);
      // Counted in the cache's stats (unrequestedDropped, /healthz).
      objects.dropIfUnrequested(object, seen);
    }, this.options.unrequestedHoldMs ?? DEFAULT_UNREQUESTED_HOLD_MS);
    timer.unref();
    this.holds.add(timer);
  }

  private async stage(hint: StageHint, network: string): Promise<void> {
    const { objects } = this.options;
    const cached = objects.isCached(hint.url, hint.range);
    const started = this.clock();
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.options.timeoutMs)]);
    try {
      const object = await objects.get(hint.url, signal, hint.range, network);
      const originMs = cached ? 0 : Math.max(0, this.clock() - started);
      // Served but not kept (larger than the cache, or the origin said no-store): nothing is staged.
      if (!object.cached) return this.answer(hint, 'failed', 'uncacheable', originMs, object.bytes.length);
      const prepared = await this.prepare(hint, object, signal);
      // Only what this hint made the proxy fetch: an object someone else brought in stays.
      if (!cached) this.holdForRequests(object);
      this.answer(hint, 'staged', undefined, originMs, object.bytes.length, cached, prepared);
    } catch (e) {
      const error = signal.aborted && !this.abort.signal.aborted ? 'timeout' : asServeError(e).kind;
      this.log.info({ url: hint.url, clientId: hint.clientId, error }, 'staging failed');
      this.answer(hint, 'failed', error, Math.max(0, this.clock() - started));
    }
  }

  /**
   * Prepares the staged object for the hint's layout, if it names one: whether it was (undefined
   * without a layout). A failure is counted and logged; the object stays staged.
   */
  private async prepare(hint: StageHint, object: CachedObject, signal: AbortSignal): Promise<boolean | undefined> {
    const { prepare, metrics } = this.options;
    if (!hint.layout) return undefined;
    if (!prepare) return false;
    try {
      await prepare(object, hint.layout, signal);
      metrics.stagePrepared.inc({ outcome: signal.aborted ? 'failed' : 'prepared' });
      return !signal.aborted;
    } catch (e) {
      const outcome =
        e instanceof LayoutRefused ? 'refused' : e instanceof EncoderBudgetError ? 'overloaded' : 'failed';
      metrics.stagePrepared.inc({ outcome });
      this.log.info(
        { url: hint.url, clientId: hint.clientId, layout: hint.layout, outcome, err: e },
        'staged object not prepared',
      );
      return false;
    }
  }

  private answer(
    hint: StageHint,
    status: 'staged' | 'failed',
    error: string | undefined,
    originMs = 0,
    bytes = 0,
    cached = false,
    prepared?: boolean,
  ): void {
    this.options.metrics.stageHints.inc({ outcome: error ?? (cached ? 'cached' : 'staged') });
    this.options.send({
      type: 'staged',
      clientId: hint.clientId,
      requestId: hint.requestId,
      status,
      originMs: Math.min(3_600_000, Math.round(originMs)),
      cached,
      bytes,
      ...(error !== undefined ? { error } : {}),
      ...(prepared !== undefined ? { prepared } : {}),
    });
  }
}
