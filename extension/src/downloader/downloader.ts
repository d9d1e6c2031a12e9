/**
 * The downloader's request handling, independent of the frame it runs in: one MutpClient (made
 * lazily, made again when origo's URL changes), downloads queued `concurrency` at a time,
 * identical requests sharing one download, and the answers the hook turns into responses.
 *
 * Byte ranges: a Range request becomes a ranged MUTP transfer (the REQUEST names the bytes, the
 * proxies fetch only them from the origin, META says where they sit and the Content-Type), so
 * the page waits for its range, not the file, and a file of any size plays range by range; only
 * a range longer than `maxObjectBytes` goes to the network ('too-large'). An open-ended range
 * (`bytes=a-`) asks for the rest when an earlier answer told the file's length, otherwise for up
 * to `maxObjectBytes` (and goes to the network when the rest is longer). A suffix range
 * (`bytes=-n`) of a file whose length is unknown is served the old way: the whole object once
 * through MUTP, kept in a bounded LRU, the range sliced from it. URLs that name their bytes
 * themselves (YouTube-style `range=`) need no Range header and are fetched as they are.
 *
 * Staging (settings.staging, coded modes): a request carries the segments its playlist lists next
 * (the hook reads the manifests; the content script keeps only those the page may read). One
 * SegmentStager per client, mode and N keeps one proxy set for the frame, downloads through it
 * (GetOptions.use), hints upcoming segments to it as SoftStage's rule says, and replaces proxies
 * that failed only between two segments (chunk-aware handoff). Choosing the set is the
 * download's first call to origo: it has the request's origo limit, and its failure (origo down
 * or hung, no proxies) is the download's, with the same reason and cause.
 *
 * Deadlines: each request's limits for origo, the proxy connections and the first byte derive
 * from the hook's deadline for it (common/deadlines.ts), so the downloader answers with the real
 * cause before the hook gives up with 'timeout'. While the client has origo in its back-off
 * period, requests are answered at once (reason 'origo-unreachable', cause 'origo-down').
 */
import type { ByteRange, ProxyInfo } from '@mutp/shared';
import {
  ClientError,
  describeDown,
  GetOptions,
  GetResult,
  OrigoDown,
  SegmentRef,
  SegmentStager,
  StagerStats,
  StagingClient,
} from '@mutp/shared/client';
import { limitsFor, origoCause } from '../common/deadlines';
import { GetFailure, GetRequest, GetSuccess, ProxyShareRecord, SegmentRecord } from '../common/messages';
import { contentRange, formatRange, guessContentType, redactUrl, resolveRange } from '../common/media';
import { DOWNLOAD_MODES, ExtensionMode, origoUrlProblem, Settings } from '../common/settings';
import { ByteLru } from './lru';

/** The part of MutpClient the downloader uses. */
export interface ClientLike {
  get(url: string, options: GetOptions): Promise<GetResult>;
  close(): void;
  /** Set while origo is in its back-off period (MutpClient with a back-off policy). */
  origoDown?(): OrigoDown | undefined;
  /** Opens the origo session ahead of the first request (MutpClient). */
  prepare?(timeoutMs: number): void;
  /** Staging (MutpClient): without these, segments are never staged. */
  chooseProxies?: StagingClient['chooseProxies'];
  stage?: StagingClient['stage'];
  /** Proxies that said they are going away (MutpClient): replaced between segments. */
  leavingProxies?: StagingClient['leavingProxies'];
  onProxyLeaving?: StagingClient['onProxyLeaving'];
}

export interface DownloaderDeps {
  settings(): Settings;
  /** A client for these settings (called again when origoUrl, maxObjectBytes or transport change). */
  createClient(settings: Settings): Promise<ClientLike>;
  /** False when the mode's codec could not be loaded. */
  modeAvailable?(mode: ExtensionMode): boolean;
  now(): number;
  /** Timers (default: the global ones); returns the function that cancels. */
  setTimer?(ms: number, callback: () => void): () => void;
  onRecord?(record: SegmentRecord): void;
}

/**
 * After origo could not be reached, requests fail at once for this long: only for a client
 * without its own back-off (`origoDown`); the extension's MutpClient has one (2 s doubling to 60 s).
 */
export const ORIGO_RETRY_MS = 5000;
const MAX_TOO_LARGE_URLS = 256;
/** Files whose complete length an answer told (open-ended and suffix ranges of them are exact). */
const MAX_KNOWN_LENGTHS = 256;

/** How a page's Range request is fetched through MUTP. */
type RangePlan =
  /** A ranged transfer; `open`: the page asked to the end without the length being known. */
  | { kind: 'ranged'; range: ByteRange; open: boolean }
  /** The whole object, sliced (a suffix range of a file of unknown length). */
  | { kind: 'whole' }
  | { kind: 'unsatisfiable'; message: string }
  | { kind: 'too-large'; message: string };

interface Fetched {
  bytes: Uint8Array;
  contentType: string;
  result: GetResult;
}

interface Job {
  key: string;
  url: string;
  mode: ExtensionMode;
  /** The bytes this download asks for (undefined: the whole object). */
  range?: ByteRange;
  controller: AbortController;
  waiters: Set<number>;
  promise: Promise<Fetched>;
  /** Why the downloader stopped it itself ('too-large'). */
  stopReason?: string;
  /** The object went into the range cache: its buffer must never be handed out (transferred). */
  cached?: boolean;
  /** Cancels the first-byte timer. */
  stopTimer?: () => void;
}

class Failure extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** A frame's stager: one per client, mode and N. */
interface FrameStaging {
  key: string;
  stager: SegmentStager;
}

export class Downloader {
  private client?: { key: string; promise: Promise<ClientLike>; ready?: ClientLike };
  private readonly jobs = new Map<string, Job>();
  private readonly byRequest = new Map<number, Job>();
  private readonly cancelled = new Set<number>();
  private readonly queue: { run: () => void; signal: AbortSignal }[] = [];
  private running = 0;
  private cache: ByteLru;
  private cacheCapacity: number;
  private readonly tooLarge = new Set<string>();
  private readonly completeLengths = new Map<string, number>();
  private origoDownUntil = -Infinity;
  private staging?: FrameStaging;
  /** Downloads that were staged (a proxy held the segment) when they started, for their records. */
  private readonly stagedResults = new WeakMap<GetResult, boolean>();

  constructor(private readonly deps: DownloaderDeps) {
    this.cacheCapacity = deps.settings().rangeCacheBytes;
    this.cache = new ByteLru(this.cacheCapacity);
  }

  /** Answers one request (undefined when it was cancelled: nobody waits for the answer). */
  async handle(req: GetRequest): Promise<GetSuccess | GetFailure | undefined> {
    const startedAt = this.deps.now();
    const settings = this.deps.settings();
    const fail = (reason: string, message = reason, cause?: string): GetFailure => {
      this.record(req, startedAt, { ok: false, reason, detail: message === reason ? undefined : message });
      const failure: GetFailure = { type: 'result', id: req.id, ok: false, reason, message: message.slice(0, 512) };
      if (cause) failure.cause = cause;
      return failure;
    };
    if (!validRequest(req)) return fail('bad-request');
    if (!settings.enabled) return fail('disabled');
    const origoProblem = origoUrlProblem(settings.origoUrl);
    if (origoProblem) return fail('origo-insecure', origoProblem);
    if (this.deps.modeAvailable && !this.deps.modeAvailable(req.mode)) return fail('codec-unavailable');
    this.resizeCache(settings.rangeCacheBytes);

    let plan: RangePlan | undefined;
    if (req.range) {
      const cached = this.cache.get(req.url);
      if (cached) return this.answer(req, startedAt, cached, guessContentType(req.url), undefined);
      plan = this.planRange(req, settings);
      if (plan.kind === 'unsatisfiable') return fail('range-unsatisfiable', plan.message);
      if (plan.kind === 'too-large') return fail('too-large', plan.message);
    }
    // A file too large to fetch whole may still be read range by range.
    if (plan?.kind !== 'ranged' && this.tooLarge.has(req.url)) return fail('too-large');
    const down = this.origoDown(settings);
    if (down) return fail('origo-unreachable', down, 'origo-down');

    const job = this.jobFor(req, plan?.kind === 'ranged' ? plan.range : undefined);
    job.waiters.add(req.id);
    this.byRequest.set(req.id, job);
    let fetched: Fetched;
    try {
      fetched = await job.promise;
    } catch (e) {
      const { reason, message, cause } = this.failureOf(job, e);
      // Marked even when the page gave up already: the next request must not try again at once.
      if (reason === 'origo-unreachable' && cause !== 'origo-down')
        this.origoDownUntil = this.deps.now() + ORIGO_RETRY_MS;
      if (this.cancelled.delete(req.id)) return undefined;
      if (reason === 'too-large') this.rememberTooLarge(req.url);
      return fail(reason, message, cause);
    } finally {
      job.waiters.delete(req.id);
      this.byRequest.delete(req.id);
    }
    if (this.cancelled.delete(req.id)) return undefined;
    if (plan?.kind === 'ranged') return this.answerRanged(req, startedAt, plan, fetched, job.waiters.size === 0, fail);
    if (req.range && fetched.bytes.byteLength <= settings.maxObjectBytes && this.cache.set(req.url, fetched.bytes)) {
      job.cached = true;
    }
    // The last request served from this download may have its bytes without a copy, unless the
    // range cache keeps them (a range request of the same download put them there first).
    const exclusive = job.waiters.size === 0 && !req.range && !job.cached;
    return this.answer(req, startedAt, fetched.bytes, fetched.contentType, fetched.result, exclusive);
  }

  /**
   * A page is about to play: make the client and start its origo connection now, so a hung or
   * refused origo is known (and in back-off) by the time the first segment is asked for.
   */
  prepare(): void {
    const settings = this.deps.settings();
    if (!settings.enabled || origoUrlProblem(settings.origoUrl)) return;
    const origoMs = limitsFor(settings.deadlineMs).origoMs;
    this.clientFor(settings)
      .then((client) => client.prepare?.(origoMs))
      .catch(() => undefined);
  }

  /** The page no longer waits for `id`; the download stops when nobody else waits for it. */
  cancel(id: number): void {
    const job = this.byRequest.get(id);
    if (!job) return;
    this.cancelled.add(id);
    job.waiters.delete(id);
    if (job.waiters.size === 0) job.controller.abort();
  }

  /** What staging did in this frame (undefined before the first staged request). */
  stagingStats(): StagerStats | undefined {
    return this.staging?.stager.stats();
  }

  /** Closes the client (the frame is going away, or the settings changed). */
  close(): void {
    this.staging?.stager.close();
    this.staging = undefined;
    for (const job of this.jobs.values()) job.controller.abort();
    const client = this.client;
    this.client = undefined;
    client?.promise.then((c) => c.close()).catch(() => undefined);
    this.cache.clear();
  }

  /** How to fetch the page's range: from what it asked and the file lengths answers told. */
  private planRange(req: GetRequest, settings: Settings): RangePlan {
    const spec = req.range!;
    const max = settings.maxObjectBytes;
    const complete = this.completeLengths.get(req.url);
    let start: number;
    let length: number;
    let open = false;
    if (spec.kind === 'suffix') {
      if (complete === undefined) return { kind: 'whole' };
      if (spec.length === 0 || complete === 0)
        return { kind: 'unsatisfiable', message: `${formatRange(spec)} of ${complete} bytes` };
      start = Math.max(0, complete - spec.length);
      length = complete - start;
    } else if (spec.end !== undefined) {
      start = spec.start;
      length = spec.end - spec.start + 1;
      if (complete !== undefined && start >= complete)
        return { kind: 'unsatisfiable', message: `${formatRange(spec)} of ${complete} bytes` };
    } else if (complete !== undefined) {
      start = spec.start;
      length = complete - spec.start;
      if (length <= 0) return { kind: 'unsatisfiable', message: `${formatRange(spec)} of ${complete} bytes` };
    } else {
      start = spec.start;
      length = max;
      open = true;
    }
    if (length > max) return { kind: 'too-large', message: `a range of ${length} bytes (at most ${max} per request)` };
    if (start + length - 1 > MAX_RANGE_END)
      return { kind: 'unsatisfiable', message: `${formatRange(spec)}: beyond 2^48 bytes` };
    return { kind: 'ranged', range: { start, length }, open };
  }

  /** A ranged transfer's bytes as the 206 the origin would have sent (or why not). */
  private answerRanged(
    req: GetRequest,
    startedAt: number,
    plan: Extract<RangePlan, { kind: 'ranged' }>,
    fetched: Fetched,
    exclusive: boolean,
    fail: (reason: string, message?: string) => GetFailure,
  ): GetSuccess | GetFailure {
    const served = fetched.result.attributes?.range;
    if (!served || served.start !== plan.range.start)
      return fail('internal', 'the client did not serve the range asked for');
    const complete = served.completeLength;
    if (complete !== undefined) this.rememberLength(req.url, complete);
    const bytes = fetched.bytes;
    const end = served.start + bytes.byteLength - 1;
    // Open-ended: the page wants everything to the end; a partial answer would be a wrong one.
    if (plan.open && (complete === undefined || end + 1 < complete))
      return fail('too-large', `the rest of the file is longer than ${plan.range.length} bytes`);
    const body =
      exclusive && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
        ? (bytes.buffer as ArrayBuffer)
        : bytes.slice().buffer;
    this.record(req, startedAt, {
      ok: true,
      bytes: body.byteLength,
      objectBytes: bytes.byteLength,
      result: fetched.result,
    });
    return {
      type: 'result',
      id: req.id,
      ok: true,
      body,
      status: 206,
      contentType: fetched.contentType,
      contentRange: `bytes ${served.start}-${end}/${complete ?? '*'}`,
    };
  }

  private answer(
    req: GetRequest,
    startedAt: number,
    bytes: Uint8Array,
    contentType: string,
    result: GetResult | undefined,
    exclusive = false,
  ): GetSuccess | GetFailure {
    let body: ArrayBuffer;
    let status: 200 | 206 = 200;
    let range: string | undefined;
    if (req.range) {
      const r = resolveRange(req.range, bytes.byteLength);
      if (!r) {
        this.record(req, startedAt, { ok: false, reason: 'range-unsatisfiable', objectBytes: bytes.byteLength });
        return {
          type: 'result',
          id: req.id,
          ok: false,
          reason: 'range-unsatisfiable',
          message: `${formatRange(req.range)} of ${bytes.byteLength} bytes`,
        };
      }
      status = 206;
      range = contentRange(r.start, r.end, bytes.byteLength);
      body = bytes.slice(r.start, r.end + 1).buffer;
    } else if (exclusive && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) {
      body = bytes.buffer as ArrayBuffer; // transferred to the page as it is
    } else {
      // A copy: the object is shared by other requests (its buffer is transferred to the page).
      body = bytes.slice().buffer;
    }
    this.record(req, startedAt, {
      ok: true,
      bytes: body.byteLength,
      objectBytes: bytes.byteLength,
      result,
    });
    const success: GetSuccess = { type: 'result', id: req.id, ok: true, body, status, contentType };
    if (range) success.contentRange = range;
    return success;
  }

  private jobFor(req: GetRequest, range: ByteRange | undefined): Job {
    const key = `${req.mode} ${req.proxies} ${req.url}${range ? ` ${range.start}+${range.length}` : ''}`;
    const existing = this.jobs.get(key);
    if (existing && !existing.controller.signal.aborted) return existing;
    const controller = new AbortController();
    const limits = limitsFor(req.deadlineMs ?? this.deps.settings().deadlineMs);
    const job: Job = {
      key,
      url: req.url,
      mode: req.mode,
      range,
      controller,
      waiters: new Set(),
      promise: Promise.resolve() as unknown as Promise<Fetched>,
    };
    // No byte from the proxies in time (queue and connections included): the network is quicker.
    // Parallel HTTP reports no progress: only its own connect limits apply.
    if (req.mode !== 'http') {
      job.stopTimer = this.timer(limits.firstByteMs, () => {
        if (controller.signal.aborted) return;
        job.stopReason = 'no-first-byte';
        controller.abort();
      });
    }
    job.promise = this.enqueue(controller.signal, () => this.download(job, req, limits));
    job.promise
      .catch(() => undefined)
      .finally(() => {
        job.stopTimer?.();
        if (this.jobs.get(key) === job) this.jobs.delete(key);
      });
    this.jobs.set(key, job);
    return job;
  }

  private async download(job: Job, req: GetRequest, limits: ReturnType<typeof limitsFor>): Promise<Fetched> {
    const settings = this.deps.settings();
    const client = await this.clientFor(settings);
    const staging = this.stagingFor(client, req, settings);
    const segment: SegmentRef = { url: req.url, ...(job.range ? { range: job.range } : {}) };
    let use: ProxyInfo[] | undefined;
    let proxies = req.proxies;
    let staged = false;
    if (staging) {
      staging.setUpcoming([segment, ...(req.upcoming ?? [])], req.track);
      // Within the request's origo limit, and its failure is the download's: the download would
      // have asked origo the same (a second try would overrun the hook's deadline).
      await staging.proxies(job.controller.signal, limits.origoMs);
      staged = staging.fetchStarted(segment, req.track);
      // The set it was staged at (the stager's spread is the whole set here).
      ({ use, proxies } = staging.downloadOf(segment, req.proxies));
    }
    const result = await client.get(req.url, {
      mode: req.mode,
      proxies,
      ...(use ? { use } : {}),
      ...(job.range ? { range: job.range } : {}),
      signal: job.controller.signal,
      origoTimeoutMs: limits.origoMs,
      connectTimeoutMs: limits.proxyConnectMs,
      // Called for every datagram: the first one stops the first-byte timer, the others must cost
      // nothing (a clearTimeout per datagram was 3 % of the frame's time in Chromium).
      onProgress: ({ bytes }) => {
        if (job.stopTimer) {
          job.stopTimer();
          job.stopTimer = undefined;
        }
        if (bytes > settings.maxObjectBytes && !job.controller.signal.aborted) {
          job.stopReason = 'too-large';
          job.controller.abort();
        }
      },
    });
    if (staging) {
      this.stagedResults.set(result, staged);
      staging.fetchCompleted(segment, req.track, result);
      // Settled in the background: the page gets its bytes now, the next segment uses the new set.
      void staging.afterSegment(result, req.upcoming?.[0], req.track, undefined, use).catch(() => undefined);
    }
    if (result.object.byteLength > settings.maxObjectBytes) {
      job.stopReason = 'too-large';
      throw new Failure('too-large', `${result.object.byteLength} bytes`);
    }
    // The origin's type as the sources agreed on it; a guess from the path only without one.
    const contentType =
      result.attributes?.contentType ?? (('contentType' in result && result.contentType) || guessContentType(req.url));
    return { bytes: result.object, contentType, result };
  }

  /**
   * The stager for this request's client, mode and N (a new one when any changed), or undefined
   * when the request is not staged: staging off, Parallel HTTP, no playlist position, or a client
   * that cannot stage.
   */
  private stagingFor(client: ClientLike, req: GetRequest, settings: Settings): SegmentStager | undefined {
    if (!settings.staging || req.mode === 'http' || req.track === undefined) return undefined;
    const { chooseProxies, stage } = client;
    if (!chooseProxies || !stage) return undefined;
    const key = `${this.client?.key} ${req.mode} ${req.proxies}`;
    if (this.staging?.key !== key) {
      this.staging?.stager.close();
      const clock = {
        now: () => this.deps.now(),
        setTimer: (ms: number, callback: () => void) => this.timer(ms, callback),
      };
      const { onProxyLeaving } = client;
      const stagingClient: StagingClient = {
        chooseProxies: (count, mode, o) => chooseProxies.call(client, count, mode, o),
        stage: (url, proxies, o) => stage.call(client, url, proxies, o),
        leavingProxies: () => client.leavingProxies?.() ?? [],
        // A proxy going away mid-segment: the stager begins its handoff at the next segment at once.
        ...(onProxyLeaving ? { onProxyLeaving: (listener) => onProxyLeaving.call(client, listener) } : {}),
      };
      // Every segment at the whole set: a player paced by its buffer gained nothing from the spread
      // rule in Chromium (no fewer stalls, lower segment goodput), and on a busy machine its staging
      // can look behind and cost the page sources (docs/testbed.md, "Mobility").
      const stager = new SegmentStager(stagingClient, clock, {
        mode: req.mode,
        proxies: req.proxies,
        staging: true,
        spread: req.proxies,
      });
      this.staging = { key, stager };
    }
    return this.staging.stager;
  }

  private timer(ms: number, callback: () => void): () => void {
    if (this.deps.setTimer) return this.deps.setTimer(ms, callback);
    const handle = setTimeout(callback, ms);
    return () => clearTimeout(handle);
  }

  private clientFor(settings: Settings): Promise<ClientLike> {
    const key = clientKey(settings);
    if (this.client?.key !== key) {
      const old = this.client;
      old?.promise.then((c) => c.close()).catch(() => undefined);
      const promise = this.deps.createClient(settings);
      const entry: { key: string; promise: Promise<ClientLike>; ready?: ClientLike } = { key, promise };
      this.client = entry;
      promise.then(
        (client) => (entry.ready = client),
        () => {
          if (this.client?.promise === promise) this.client = undefined;
        },
      );
    }
    return this.client.promise;
  }

  /** Runs `task` when fewer than `concurrency` downloads run; drops it if aborted while waiting. */
  private enqueue<T>(signal: AbortSignal, task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const run = () => {
        if (signal.aborted) {
          reject(new ClientError('cancelled', 'cancelled while queued'));
          this.pump();
          return;
        }
        this.running++;
        task()
          .then(resolve, reject)
          .finally(() => {
            this.running--;
            this.pump();
          });
      };
      this.queue.push({ run, signal });
      this.pump();
    });
  }

  private pump(): void {
    const limit = Math.max(1, this.deps.settings().concurrency);
    while (this.running < limit && this.queue.length > 0) this.queue.shift()!.run();
  }

  /**
   * Why origo is not to be tried now, or undefined: the client's back-off when it has one, else
   * the downloader's own short pause after a failure.
   */
  private origoDown(settings: Settings): string | undefined {
    const client = this.client?.key === clientKey(settings) ? this.client.ready : undefined;
    if (client?.origoDown) {
      const down = client.origoDown();
      return down ? describeDown(down) : undefined;
    }
    return this.deps.now() < this.origoDownUntil ? 'origo was unreachable moments ago' : undefined;
  }

  private failureOf(job: Job, e: unknown): { reason: string; message: string; cause?: string } {
    if (job.stopReason === 'no-first-byte')
      return { reason: 'no-first-byte', message: 'no byte from the proxies before the deadline share' };
    if (job.stopReason)
      return { reason: job.stopReason, message: `object larger than ${this.deps.settings().maxObjectBytes} bytes` };
    if (e instanceof Failure) return { reason: e.reason, message: e.message };
    const message = e instanceof Error ? e.message : String(e);
    if (message.includes('codec-unavailable')) return { reason: 'codec-unavailable', message };
    if (message.includes('range not satisfiable')) return { reason: 'range-unsatisfiable', message };
    if (e instanceof ClientError) {
      const cause = origoCause(e.code, e.message);
      // Counted as origo-unreachable (it is, from the page's side); the cause says which way.
      const reason = e.code === 'origo-down' ? 'origo-unreachable' : e.code;
      return cause ? { reason, message, cause } : { reason, message };
    }
    return { reason: 'internal', message };
  }

  private rememberLength(url: string, complete: number): void {
    this.completeLengths.delete(url);
    if (this.completeLengths.size >= MAX_KNOWN_LENGTHS)
      this.completeLengths.delete(this.completeLengths.keys().next().value as string);
    this.completeLengths.set(url, complete);
  }

  private rememberTooLarge(url: string): void {
    if (this.tooLarge.size >= MAX_TOO_LARGE_URLS) this.tooLarge.delete(this.tooLarge.values().next().value as string);
    this.tooLarge.add(url);
  }

  private resizeCache(capacity: number): void {
    if (capacity === this.cacheCapacity) return;
    this.cacheCapacity = capacity;
    this.cache = new ByteLru(capacity);
  }

  private record(
    req: GetRequest,
    startedAt: number,
    o: { ok: boolean; reason?: string; detail?: string; bytes?: number; objectBytes?: number; result?: GetResult },
  ): void {
    if (!this.deps.onRecord) return;
    const r = o.result;
    const proxies: ProxyShareRecord[] = (r?.sources ?? []).map((s) => ({
      name: s.name,
      proxyId: s.proxyId,
      share: s.share,
      useful: Number('useful' in s ? s.useful : s.bytes) || 0,
      ...('transport' in s && typeof s.transport === 'string' ? { transport: s.transport } : {}),
    }));
    const record: SegmentRecord = {
      at: Date.now(),
      url: redactUrl(req.url),
      ok: o.ok,
      mode: req.mode,
      bytes: o.bytes ?? 0,
      objectBytes: o.objectBytes ?? r?.object.byteLength ?? 0,
      durationMs: r?.durationMs ?? 0,
      totalMs: this.deps.now() - startedAt,
      goodputBps: r?.goodputBps ?? 0,
      normalizedGoodput: r?.normalizedGoodput ?? 0,
      cached: o.ok && !r,
      proxies,
    };
    if (o.reason) record.reason = o.reason;
    if (o.detail) record.detail = o.detail.split(req.url).join(record.url).slice(0, 300);
    if (req.range) record.range = formatRange(req.range);
    const staged = r && this.stagedResults.get(r);
    const stats = this.staging?.stager.stats();
    if (staged !== undefined && stats) {
      record.staged = staged;
      const { ordersSent, hintsStaged, wasted, neededAhead, spread } = stats;
      record.staging = { ordersSent, hintsStaged, wasted, neededAhead, spread };
    }
    try {
      this.deps.onRecord(record);
    } catch {
      // statistics never fail a download
    }
  }
}

function validRequest(req: GetRequest): boolean {
  if (typeof req.url !== 'string' || req.url.length > 8192 || !/^https?:\/\//i.test(req.url)) return false;
  if (!DOWNLOAD_MODES.includes(req.mode)) return false;
  if (!Number.isInteger(req.proxies) || req.proxies < 1 || req.proxies > 32) return false;
  if (req.range) {
    const r = req.range;
    const ok =
      (r.kind === 'from' &&
        Number.isSafeInteger(r.start) &&
        r.start >= 0 &&
        (r.end === undefined || r.end >= r.start)) ||
      (r.kind === 'suffix' && Number.isSafeInteger(r.length) && r.length >= 0);
    if (!ok) return false;
  }
  return true;
}

/** Largest last byte a range may name (the protocol's offsets are 48-bit). */
const MAX_RANGE_END = 2 ** 48 - 1;

/** A new client is made when these settings change. */
function clientKey(settings: Settings): string {
  return `${settings.origoUrl} ${settings.maxObjectBytes} ${settings.transport}`;
}
