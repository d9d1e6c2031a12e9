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
 * (the hook reads the manifests; the content script keeps only those the page may read), and is
 * one call of the frame's playback session (playback.ts: one per client, mode and N), which keeps
 * one proxy set for the frame, downloads through it, hints upcoming segments to it as SoftStage's
 * rule says, and replaces proxies that failed only between two segments (chunk-aware handoff).
 * Choosing the set is the download's first call to origo: it has the request's origo limit, and
 * its failure (origo down or hung, no proxies) is the download's, with the same reason and cause.
 *
 * Deadlines: each request's limits for origo, the proxy connections and the first byte derive
 * from the hook's deadline for it (common/deadlines.ts), so the downloader answers with the real
 * cause before the hook gives up with 'timeout'. While the client has origo in its back-off
 * period, requests are answered at once (reason 'origo-unreachable', cause 'origo-down'), unless
 * it has links open for the request's mode: those go on serving while origo is away (a request
 * that needs origo then fails at once in the client, with the same reason and cause).
 */
import type { ByteRange } from '@mutp/shared';
import { describeDown, GetOptions, GetResult, StagerStats } from '@mutp/shared/client';
import { limitsFor } from '../common/deadlines';
import { GetFailure, GetRequest, GetSuccess, SegmentRecord } from '../common/messages';
import { contentRange, formatRange, guessContentType, resolveRange } from '../common/media';
import { ExtensionMode, origoUrlProblem, Settings } from '../common/settings';
import { DownloadQueue } from './download-queue';
import { Failure, failureOf } from './failures';
import { ByteLru } from './lru';
import { ClientLike, FramePlayback } from './playback';
import { Answered, segmentRecord } from './records';
import { planRange, RangePlan, validRequest } from './requests';
import { FrameTimeline, TimelineEntry } from './timeline';

export type { ClientLike } from './playback';

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

export class Downloader {
  private client?: { key: string; promise: Promise<ClientLike>; ready?: ClientLike };
  private readonly jobs = new Map<string, Job>();
  private readonly byRequest = new Map<number, Job>();
  private readonly cancelled = new Set<number>();
  private readonly queue = new DownloadQueue(() => this.deps.settings().concurrency);
  private cache: ByteLru;
  private cacheCapacity: number;
  private readonly tooLarge = new Set<string>();
  private readonly completeLengths = new Map<string, number>();
  private origoDownUntil = -Infinity;
  private readonly playback: FramePlayback;
  /** Downloads that were staged (a proxy held the segment) when they started, for their records. */
  private readonly stagedResults = new WeakMap<GetResult, boolean>();
  private readonly frameTimeline = new FrameTimeline();

  constructor(private readonly deps: DownloaderDeps) {
    this.cacheCapacity = deps.settings().rangeCacheBytes;
    this.cache = new ByteLru(this.cacheCapacity);
    this.playback = new FramePlayback({
      now: () => this.deps.now(),
      setTimer: (ms: number, callback: () => void) => this.timer(ms, callback),
    });
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
      plan = planRange(req.range, this.completeLengths.get(req.url), settings.maxObjectBytes);
      if (plan.kind === 'unsatisfiable') return fail('range-unsatisfiable', plan.message);
      if (plan.kind === 'too-large') return fail('too-large', plan.message);
    }
    // A file too large to fetch whole may still be read range by range.
    if (plan?.kind !== 'ranged' && this.tooLarge.has(req.url)) return fail('too-large');
    const down = this.origoDown(settings, req.mode);
    if (down) return fail('origo-unreachable', down, 'origo-down');

    const job = this.jobFor(req, plan?.kind === 'ranged' ? plan.range : undefined);
    job.waiters.add(req.id);
    this.byRequest.set(req.id, job);
    let fetched: Fetched;
    try {
      fetched = await job.promise;
    } catch (e) {
      const { reason, message, cause } = failureOf(job.stopReason, e, this.deps.settings().maxObjectBytes);
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
    return this.playback.stats();
  }

  /** The last downloads' start, first byte and end (for profiling). */
  timeline(): TimelineEntry[] {
    return this.frameTimeline.snapshot();
  }

  /** Closes the client (the frame is going away, or the settings changed). */
  close(): void {
    this.playback.close();
    for (const job of this.jobs.values()) job.controller.abort();
    const client = this.client;
    this.client = undefined;
    client?.promise.then((c) => c.close()).catch(() => undefined);
    this.cache.clear();
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
    job.promise = this.queue.enqueue(controller.signal, () => this.download(job, req, limits));
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
    const entry = this.frameTimeline.start(req.mode, this.deps.now());
    try {
      const fetched = await this.downloadThrough(job, req, limits, entry);
      FrameTimeline.end(entry, true, this.deps.now());
      return fetched;
    } catch (e) {
      FrameTimeline.end(entry, false, this.deps.now());
      throw e;
    }
  }

  private async downloadThrough(
    job: Job,
    req: GetRequest,
    limits: ReturnType<typeof limitsFor>,
    entry: TimelineEntry,
  ): Promise<Fetched> {
    const settings = this.deps.settings();
    const now = () => this.deps.now();
    const client = await this.clientFor(settings);
    const session = this.playback.sessionFor(client, clientKey(settings), req, settings);
    const options: Pick<GetOptions, 'signal' | 'origoTimeoutMs' | 'connectTimeoutMs' | 'onProgress'> = {
      signal: job.controller.signal,
      origoTimeoutMs: limits.origoMs,
      connectTimeoutMs: limits.proxyConnectMs,
      // Called for every datagram: the first one stops the first-byte timer, the others must cost
      // nothing (a clearTimeout per datagram was 3 % of the frame's time in Chromium).
      onProgress: ({ bytes }) => {
        FrameTimeline.progress(entry, bytes, now);
        if (job.stopTimer) {
          job.stopTimer();
          job.stopTimer = undefined;
        }
        if (bytes > settings.maxObjectBytes && !job.controller.signal.aborted) {
          job.stopReason = 'too-large';
          job.controller.abort();
        }
      },
    };
    let result: GetResult;
    if (session) {
      // Choosing the set is within the request's origo limit, and its failure is the download's:
      // the download would have asked origo the same (a second try would overrun the hook's deadline).
      const segment = { url: req.url, ...(job.range ? { range: job.range } : {}) };
      const fetched = await session.fetch(segment, { ...options, upcoming: req.upcoming ?? [], track: req.track });
      result = fetched.result;
      this.stagedResults.set(result, fetched.staged);
    } else {
      const range = job.range ? { range: job.range } : {};
      result = await client.get(req.url, { ...options, ...range, mode: req.mode, proxies: req.proxies });
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

  /**
   * Why origo is not to be tried now, or undefined: the client's back-off when it has one, else
   * the downloader's own short pause after a failure. Undefined too while the client has open
   * links for `mode`: downloads go on through them while origo is away (issue 34).
   */
  private origoDown(settings: Settings, mode: ExtensionMode): string | undefined {
    const client = this.client?.key === clientKey(settings) ? this.client.ready : undefined;
    if (client?.hasOpenLinks?.(mode)) return undefined;
    if (client?.origoDown) {
      const down = client.origoDown();
      return down ? describeDown(down) : undefined;
    }
    return this.deps.now() < this.origoDownUntil ? 'origo was unreachable moments ago' : undefined;
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

  private record(req: GetRequest, startedAt: number, o: Answered): void {
    if (!this.deps.onRecord) return;
    const staged = o.result && this.stagedResults.get(o.result);
    const stats = staged === undefined ? undefined : this.playback.stats();
    const staging = staged !== undefined && stats ? { staged, stats } : undefined;
    try {
      this.deps.onRecord(segmentRecord(req, o, this.deps.now() - startedAt, staging));
    } catch {
      // statistics never fail a download
    }
  }
}

/** A new client is made when these settings change. */
function clientKey(settings: Settings): string {
  return `${settings.origoUrl} ${settings.maxObjectBytes} ${settings.transport}`;
}
