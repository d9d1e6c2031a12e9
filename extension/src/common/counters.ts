/**
 * What happened to the page's media requests, counted in the page hook (it alone sees every
 * outcome). Invariant, once nothing is in flight:
 * `media = served + aborted + sum(fallbacks)`, and `intercepted = served + aborted + (fallbacks
 * after interception)`.
 */
export interface Counters {
  /** Requests recognised as media objects (manifest segments, ranged media files, URL patterns). */
  media: number;
  /** Media requests handed to the downloader (MUTP). */
  intercepted: number;
  /** Media requests answered with bytes from MUTP. */
  served: number;
  /** Bytes handed to the page from MUTP. */
  servedBytes: number;
  /** Intercepted requests the page aborted (or that its own timeout ended) before an answer. */
  aborted: number;
  /**
   * Media requests that went to the normal network, by reason: why they were not intercepted
   * ('disabled', 'site-disabled', 'credentials', 'not-ready', ...) or why MUTP did not answer
   * (a ClientError code such as 'origo-unreachable', 'timeout', 'downloader-unavailable', ...).
   */
  fallbacks: Record<string, number>;
  /**
   * Of the fallbacks, why origo could not be used ('handshake-timeout', 'refused', 'no-welcome',
   * 'closed-before-welcome', 'origo-down' for a request not tried during a back-off, ...).
   */
  origoCauses: Record<string, number>;
  /** Manifests the hook parsed, and segment URLs it remembers. */
  manifests: number;
  segmentsKnown: number;
  /** Requests of any kind the hook looked at (media or not). */
  requests: number;
  /**
   * Dedicated workers the page started. Not covered: the hook runs in the page's main world,
   * and a worker's fetch/XHR go to the network unseen (see extension/README.md, Workers).
   */
  workers: number;
  /** Time from each served request to its answer (what the player waited for MUTP), ms. */
  servedMs: number;
  /**
   * The plain network as this page saw it (Resource Timing of the main thread's document): files
   * of at least {@link NETWORK_SAMPLE_MIN_BYTES} fetched from the network (not from the cache),
   * their bytes and the time each took from its start to its last byte. The baseline of the
   * popup's "time saved".
   */
  networkFiles: number;
  networkBytes: number;
  networkMs: number;
  /** Bytes the main thread's fetch/XHR requests got from the network (any size, where the browser tells). */
  fetchedBytes: number;
  /** The main thread's fetch/XHR responses whose size the browser hides (cross-origin without Timing-Allow-Origin). */
  fetchedUnsized: number;
  /** Bytes the page appended to SourceBuffers on the main thread (what reached the player through MSE). */
  appendedBytes: number;
  /** Media elements given a MediaSourceHandle: MSE run inside a worker, whose fetches the hook cannot see. */
  workerMediaSources: number;
}

/** Network files smaller than this say more about latency than about throughput: not a baseline sample. */
export const NETWORK_SAMPLE_MIN_BYTES = 256 * 1024;

/** The counters that are plain sums (every field but the reason maps). */
const SUMS = [
  'media',
  'intercepted',
  'served',
  'servedBytes',
  'aborted',
  'manifests',
  'segmentsKnown',
  'requests',
  'workers',
  'servedMs',
  'networkFiles',
  'networkBytes',
  'networkMs',
  'fetchedBytes',
  'fetchedUnsized',
  'appendedBytes',
  'workerMediaSources',
] as const;

export function emptyCounters(): Counters {
  return {
    media: 0,
    intercepted: 0,
    served: 0,
    servedBytes: 0,
    aborted: 0,
    fallbacks: {},
    origoCauses: {},
    manifests: 0,
    segmentsKnown: 0,
    requests: 0,
    workers: 0,
    servedMs: 0,
    networkFiles: 0,
    networkBytes: 0,
    networkMs: 0,
    fetchedBytes: 0,
    fetchedUnsized: 0,
    appendedBytes: 0,
    workerMediaSources: 0,
  };
}

export function totalFallbacks(c: Counters): number {
  return Object.values(c.fallbacks).reduce((a, b) => a + b, 0);
}

/** Sum of several frames' counters (segmentsKnown and manifests add up too). */
export function sumCounters(list: Counters[]): Counters {
  const out = emptyCounters();
  for (const c of list) {
    for (const key of SUMS) out[key] += c[key] ?? 0;
    for (const [reason, n] of Object.entries(c.fallbacks)) out.fallbacks[reason] = (out.fallbacks[reason] ?? 0) + n;
    for (const [cause, n] of Object.entries(c.origoCauses ?? {}))
      out.origoCauses[cause] = (out.origoCauses[cause] ?? 0) + n;
  }
  return out;
}

/** Counters from an untrusted message: numbers only, bounded reason names. */
export function sanitizeCounters(raw: unknown): Counters {
  const r = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);
  const out = emptyCounters();
  for (const key of SUMS) out[key] = num(r[key]);
  const names = (v: unknown, into: Record<string, number>) => {
    const f = v && typeof v === 'object' ? (v as Record<string, unknown>) : {};
    for (const [name, n] of Object.entries(f).slice(0, 64)) {
      if (/^[a-z0-9-]{1,40}$/.test(name) && num(n) > 0) into[name] = num(n);
    }
  };
  names(r.fallbacks, out.fallbacks);
  names(r.origoCauses, out.origoCauses);
  return out;
}
