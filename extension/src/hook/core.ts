/**
 * The page hook's state and policy, independent of how requests are made: the segment registry,
 * the configuration, the interception decision, the downloader round trip with its deadline, and
 * the counters. The fetch and XHR wrappers (fetch.ts, xhr.ts) only translate between the page's
 * API and this.
 */
import { Counters, emptyCounters, NETWORK_SAMPLE_MIN_BYTES } from '../common/counters';
import { GetFailure, GetRequest, GetSuccess, HookConfig, MAX_UPCOMING } from '../common/messages';
import { manifestHint } from '../common/media';
import { hookDeadline, MIN_DEADLINE_MS } from '../common/deadlines';
import { DEFAULT_SETTINGS } from '../common/settings';
import { compilePatterns, CompiledPatterns, decide, Decision, RequestFacts } from './decide';
import { extractManifest, SegmentRegistry } from './manifest';
import { SettingsWait, type Timers } from './settings-wait';

export type InterceptDecision = Extract<Decision, { intercept: true }>;

/** The downloader as the hook sees it (a MessagePort in the extension, a stub in tests). */
export interface DownloaderTransport {
  /** Sends a request; `answer` is called at most once (unless the request is cancelled). */
  request(req: GetRequest, answer: (a: GetSuccess | GetFailure) => void): void;
  cancel(id: number): void;
}

export type Outcome =
  | { kind: 'served'; answer: GetSuccess }
  | { kind: 'fallback'; reason: string; cause?: string }
  /** The page aborted (or its own timeout fired) first. */
  | { kind: 'cancelled' };

export interface Pending {
  readonly promise: Promise<Outcome>;
  /** The page gave up on the request: tells the downloader, counts it as aborted. */
  cancel(): void;
}

/** A decision that waits for the settings (HookCore.decideOrWait). */
export interface LaterDecision {
  /** Resolves with the decision, made and counted when the settings came or the wait ended. */
  readonly promise: Promise<Decision>;
  /** The page gave up on the request while it waited: counts it as aborted. */
  cancel(): void;
}

export type Ruling = { now: Decision } | { later: LaterDecision };

/** The hook's timers (settings-wait.ts defines them, where they are first needed). */
export type { Timers };

/** What the hook reads of a Resource Timing entry (the page's own network fetches). */
export interface NetworkEntry {
  initiatorType: string;
  /** Body bytes as sent (0 when the browser hides it: cross-origin without Timing-Allow-Origin). */
  encodedBodySize: number;
  /** 0 for a response from the cache (or hidden). */
  transferSize: number;
  startTime: number;
  responseEnd: number;
}

/** (Defined with the deadline rule in common/deadlines.ts, which the content script shares.) */
export { MIN_DEADLINE_MS };
/** Manifests larger than this are not parsed. */
export const MAX_MANIFEST_CHARS = 8 * 1024 * 1024;

export class HookCore {
  readonly counters: Counters = emptyCounters();
  readonly registry = new SegmentRegistry();
  private config?: HookConfig;
  /**
   * Until the settings come, the default patterns: a request they match may wait for the
   * settings (and is then judged by the configured ones) rather than pass as not media.
   */
  private patterns: CompiledPatterns = compilePatterns(DEFAULT_SETTINGS.urlPatterns);
  private readonly settingsWait: SettingsWait;
  private nextId = 1;
  /** Called (synchronously) whenever a counter changes. */
  onCountersChanged?: () => void;
  /** Called when the configuration changes. */
  onConfig?: (config: HookConfig) => void;
  /** Called when a manifest with segments was read (the downloader can get ready before the first segment). */
  onManifest?: () => void;

  constructor(
    private readonly transport: DownloaderTransport,
    private readonly timers: Timers,
    /** Monotonic ms (the page's performance.now); without it served requests are not timed. */
    private readonly now?: () => number,
  ) {
    this.settingsWait = new SettingsWait(timers);
  }

  setConfig(config: HookConfig): void {
    this.config = config;
    this.patterns = compilePatterns(config.urlPatterns);
    this.safely(() => this.onConfig?.(config));
    this.settingsWait.end();
  }

  getConfig(): HookConfig | undefined {
    return this.config;
  }

  /** Decides and counts; never throws (an exception in our code means: leave the request alone). */
  decide(facts: RequestFacts): Decision {
    const d = this.judge(facts);
    this.count(d);
    return d;
  }

  /**
   * As decide(), except for a request that only the missing settings keep from being served: it
   * waits for them (settings-wait.ts bounds how many and how long) and is decided, and counted,
   * when they come or the wait ends (then `not-ready`, as without waiting). Never throws.
   */
  decideOrWait(facts: RequestFacts): Ruling {
    const d = this.judge(facts);
    const waiting = !d.intercept && d.reason === 'not-ready' ? this.settingsWait.enter() : undefined;
    if (!waiting) {
      this.count(d);
      return { now: d };
    }
    const promise = waiting.promise.then(() => this.decide(facts));
    const cancel = () => {
      if (!waiting.cancel()) return;
      this.counters.requests++;
      this.counters.media++;
      this.countAbortedEarly();
    };
    return { later: { promise, cancel } };
  }

  private judge(facts: RequestFacts): Decision {
    try {
      return decide(facts, { config: this.config, lookup: (u) => this.registry.lookup(u), patterns: this.patterns });
    } catch {
      return { intercept: false, media: false, reason: 'not-media' };
    }
  }

  private count(d: Decision): void {
    this.counters.requests++;
    if (d.intercept || d.media) {
      this.counters.media++;
      if (!d.intercept) this.bump(d.reason);
      this.changed(); // (pages without video never publish anything)
    }
  }

  /** The page started a dedicated worker: what it fetches is not covered (counted for the popup). */
  noteWorker(): void {
    this.counters.workers++;
    this.changed();
  }

  /** The page appended bytes to a SourceBuffer (main thread): media that reached the player. */
  noteAppended(bytes: number): void {
    if (!(bytes > 0)) return;
    this.counters.appendedBytes += bytes;
    this.changed();
  }

  /** A media element got a MediaSourceHandle: its MediaSource (and so its fetches) live in a worker. */
  noteWorkerMediaSource(): void {
    this.counters.workerMediaSources++;
    this.changed();
  }

  /**
   * A file the page fetched from the network (Resource Timing). Requests served by MUTP never
   * reach the network, so they are not here: these are fallbacks, pass-through and other files.
   */
  noteNetwork(e: NetworkEntry): void {
    const c = this.counters;
    const fromNetwork = e.transferSize > 0;
    if (e.initiatorType === 'xmlhttprequest' || e.initiatorType === 'fetch') {
      if (e.encodedBodySize > 0) c.fetchedBytes += e.encodedBodySize;
      else if (e.transferSize === 0 && e.responseEnd > 0) c.fetchedUnsized++;
    }
    const ms = e.responseEnd - e.startTime;
    if (fromNetwork && e.encodedBodySize >= NETWORK_SAMPLE_MIN_BYTES && ms > 0) {
      c.networkFiles++;
      c.networkBytes += e.encodedBodySize;
      c.networkMs += ms;
    }
    this.changed();
  }

  /** The deadline for one request: 2× the segment's duration when known, at most the configured one. */
  deadlineFor(d: InterceptDecision): number {
    return hookDeadline(this.config?.deadlineMs ?? 10_000, d.segment?.duration);
  }

  /** Asks the downloader; resolves with the bytes or with the reason to use the network instead. */
  serve(d: InterceptDecision): Pending {
    this.counters.intercepted++;
    this.changed();
    const id = this.nextId++;
    let settled = false;
    let resolve!: (o: Outcome) => void;
    const promise = new Promise<Outcome>((r) => (resolve = r));
    const started = this.now?.();
    const finish = (o: Outcome) => {
      if (settled) return;
      settled = true;
      this.timers.clearTimeout(timer);
      if (o.kind === 'served') {
        this.counters.served++;
        this.counters.servedBytes += o.answer.body.byteLength;
        const now = this.now?.();
        if (started !== undefined && now !== undefined) this.counters.servedMs += Math.max(0, now - started);
      } else if (o.kind === 'fallback') {
        this.bump(o.reason);
        if (o.cause) this.counters.origoCauses[o.cause] = (this.counters.origoCauses[o.cause] ?? 0) + 1;
      } else this.counters.aborted++;
      this.changed();
      resolve(o);
    };
    const timer = this.timers.setTimeout(() => {
      if (settled) return;
      this.safely(() => this.transport.cancel(id));
      finish({ kind: 'fallback', reason: 'timeout' });
    }, this.deadlineFor(d));
    const config = this.config;
    const req: GetRequest = {
      type: 'get',
      id,
      url: d.url,
      mode: config?.mode ?? 'rlnc',
      proxies: config?.proxies ?? 4,
    };
    if (d.range) req.range = d.range;
    if (d.segment?.duration !== undefined) req.duration = d.segment.duration;
    this.attachUpcoming(req, d);
    try {
      this.transport.request(req, (a) => {
        if (a.ok) {
          const problem = checkAnswer(a);
          finish(problem ? { kind: 'fallback', reason: problem } : { kind: 'served', answer: a });
        } else {
          const reason = typeof a.reason === 'string' ? a.reason : 'download-failed';
          const cause = typeof a.cause === 'string' && /^[a-z0-9-]{1,40}$/.test(a.cause) ? a.cause : undefined;
          finish({ kind: 'fallback', reason, ...(cause ? { cause } : {}) });
        }
      });
    } catch {
      finish({ kind: 'fallback', reason: 'internal' });
    }
    return {
      promise,
      cancel: () => {
        if (settled) return;
        this.safely(() => this.transport.cancel(id));
        finish({ kind: 'cancelled' });
      },
    };
  }

  /** What the player will ask for after this segment, so the downloader can stage it (never throws). */
  private attachUpcoming(req: GetRequest, d: InterceptDecision): void {
    if (d.segment?.kind !== 'media') return;
    this.safely(() => {
      const offset = d.segment?.ranged && d.range?.kind === 'from' ? d.range.start : undefined;
      const next = this.registry.upcoming(d.url, offset, MAX_UPCOMING);
      if (!next) return;
      req.upcoming = next.segments;
      req.track = next.track;
    });
  }

  /** A media request the page aborted before it was handed to the downloader. */
  countAbortedEarly(): void {
    this.counters.aborted++;
    this.changed();
  }

  /** A fallback decided by a wrapper (an exception on our side after the decision). */
  countFallback(reason: string): void {
    this.bump(reason);
    this.changed();
  }

  /** Whether a response body should be read as a possible manifest. */
  mightBeManifest(url: string, contentType: string | null): boolean {
    return manifestHint(url, contentType) !== undefined;
  }

  /** Reads a manifest body the page loaded and remembers its segments; never throws. */
  observeManifest(url: string, text: string): void {
    try {
      if (text.length > MAX_MANIFEST_CHARS) return;
      const info = extractManifest(text, url);
      if (!info) return;
      this.registry.addManifest(url, info);
      this.counters.manifests = this.registry.manifestsSeen;
      this.counters.segmentsKnown = this.registry.size;
      this.changed();
      if (info.segments.length > 0 && this.config?.enabled) this.safely(() => this.onManifest?.());
    } catch {
      // a manifest we cannot read only means its segments go to the network
    }
  }

  private bump(reason: string): void {
    this.counters.fallbacks[reason] = (this.counters.fallbacks[reason] ?? 0) + 1;
  }

  private changed(): void {
    this.safely(() => this.onCountersChanged?.());
  }

  private safely(f: () => void): void {
    try {
      f();
    } catch {
      // never let our bookkeeping break the page
    }
  }
}

/** A malformed answer from the downloader is a reason to fall back, not to hand it to the player. */
function checkAnswer(a: GetSuccess): string | undefined {
  if (!(a.body instanceof ArrayBuffer)) return 'bad-answer';
  if (a.status !== 200 && a.status !== 206) return 'bad-answer';
  if (a.status === 206) {
    const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(a.contentRange ?? '');
    if (!m || Number(m[2]) - Number(m[1]) + 1 !== a.body.byteLength) return 'bad-answer';
  }
  return undefined;
}
