/**
 * What the extension lets a page fetch through the proxies: only what the page itself could read
 * with a credential-less request. Runs in the isolated content script, the one part that both
 * knows the page's real origin and cannot be tampered with by page scripts (the page-world hook
 * can: its checks are a fast path, these are the boundary).
 *
 * - http(s) only, no `user:pass@` (a proxy cannot honour them, and they are secrets);
 * - same-origin URLs are allowed without a network request;
 * - a cross-origin URL needs the origin's CORS consent for the page's origin: one credential-less
 *   HEAD (CORS-safelisted, so no preflight), made as the page (Chrome's content-script fetch
 *   follows the page's CORS; Firefox's `content.fetch` too), cached per URL for a while.
 *
 * The same rules apply to the upcoming segments a request names for staging.
 */
import type { UpcomingSegment } from '../common/messages';

export type UrlVerdict =
  { ok: true; url: string; crossOrigin: boolean } | { ok: false; reason: 'scheme' | 'credentials' | 'bad-request' };

const MAX_URL_CHARS = 8192;

/** The URL as the proxies would fetch it (fragment dropped), or why it may not go to them. */
export function checkUrl(raw: unknown, pageOrigin: string): UrlVerdict {
  if (typeof raw !== 'string' || raw.length > MAX_URL_CHARS) return { ok: false, reason: 'bad-request' };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'bad-request' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, reason: 'scheme' };
  if (url.username !== '' || url.password !== '') return { ok: false, reason: 'credentials' };
  url.hash = '';
  return { ok: true, url: url.href, crossOrigin: url.origin !== pageOrigin };
}

/** The part of a fetch Response the consent check reads. */
export interface HeadResponse {
  type: string;
  headers: { get(name: string): string | null };
}

export type HeadFetch = (url: string, init: RequestInit) => Promise<HeadResponse>;

/**
 * True when the HEAD's answer shows the origin lets `pageOrigin` read `url`. A response of type
 * 'cors' passed the browser's own CORS check; one of type 'basic' for a cross-origin URL means the
 * request ran with extension privileges (a content script with host access in Firefox), so the
 * header is checked here as the browser would.
 */
export async function corsConsent(fetchHead: HeadFetch, url: string, pageOrigin: string): Promise<boolean> {
  try {
    const response = await fetchHead(url, {
      method: 'HEAD',
      mode: 'cors',
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'follow',
      referrerPolicy: 'no-referrer',
    });
    if (response.type === 'cors') return true;
    if (response.type !== 'basic') return false;
    const allowed = response.headers.get('access-control-allow-origin')?.trim();
    return allowed === '*' || (allowed !== undefined && allowed === pageOrigin && pageOrigin !== 'null');
  } catch {
    return false; // a CORS failure, a network error or a CSP block: the page could not read it either
  }
}

/** Consent answers per URL, kept `ttlMs` and at most `maxEntries` (oldest dropped first). */
export class ConsentCache {
  private readonly entries = new Map<string, { at: number; answer: Promise<boolean>; settled?: boolean }>();

  constructor(
    private readonly ask: (url: string) => Promise<boolean>,
    private readonly now: () => number,
    private readonly ttlMs = 5 * 60_000,
    private readonly maxEntries = 512,
  ) {}

  /** The answer when it is known already (undefined: never asked, expired, or still asking). */
  known(url: string): boolean | undefined {
    const hit = this.entries.get(url);
    if (!hit || this.now() - hit.at >= this.ttlMs) return undefined;
    return hit.settled;
  }

  check(url: string): Promise<boolean> {
    const hit = this.entries.get(url);
    if (hit && this.now() - hit.at < this.ttlMs) return hit.answer;
    this.entries.delete(url);
    while (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    const entry: { at: number; answer: Promise<boolean>; settled?: boolean } = {
      at: this.now(),
      answer: this.ask(url).catch(() => false),
    };
    entry.answer.then((ok) => (entry.settled = ok));
    this.entries.set(url, entry);
    return entry.answer;
  }
}

/**
 * The upcoming segments (for staging) the page could read itself, as the proxies would fetch them.
 * A cross-origin one whose CORS answer is not known yet is left out, and its check starts now so a
 * later request carries it: staging never delays the request it rides on.
 */
export function readableUpcoming(
  list: readonly UpcomingSegment[],
  pageOrigin: string,
  consent: Pick<ConsentCache, 'known' | 'check'>,
): UpcomingSegment[] {
  const out: UpcomingSegment[] = [];
  for (const segment of list) {
    const verdict = checkUrl(segment.url, pageOrigin);
    if (!verdict.ok) continue;
    if (verdict.crossOrigin && consent.known(verdict.url) !== true) {
      void consent.check(verdict.url);
      continue;
    }
    out.push(segment.range ? { url: verdict.url, range: { ...segment.range } } : { url: verdict.url });
  }
  return out;
}
