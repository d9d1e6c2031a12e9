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
}

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
  };
}

export function totalFallbacks(c: Counters): number {
  return Object.values(c.fallbacks).reduce((a, b) => a + b, 0);
}

/** Sum of several frames' counters (segmentsKnown and manifests add up too). */
export function sumCounters(list: Counters[]): Counters {
  const out = emptyCounters();
  for (const c of list) {
    out.media += c.media;
    out.intercepted += c.intercepted;
    out.served += c.served;
    out.servedBytes += c.servedBytes;
    out.aborted += c.aborted;
    out.manifests += c.manifests;
    out.segmentsKnown += c.segmentsKnown;
    out.requests += c.requests;
    out.workers += c.workers ?? 0;
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
  out.media = num(r.media);
  out.intercepted = num(r.intercepted);
  out.served = num(r.served);
  out.servedBytes = num(r.servedBytes);
  out.aborted = num(r.aborted);
  out.manifests = num(r.manifests);
  out.segmentsKnown = num(r.segmentsKnown);
  out.requests = num(r.requests);
  out.workers = num(r.workers);
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
