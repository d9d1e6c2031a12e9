/**
 * The content script between the page hook and the downloader frame. The hook (page world, so
 * under the page's control) never holds a port to the downloader: it talks to this relay, which
 * checks every request against the settings and the request policy, rewrites what the extension
 * decides (mode, N, the URL as the proxies fetch it), and forwards it on the private port to the
 * downloader. Answers come back the same way, the bytes transferred, not copied.
 */
import { GetFailure, GetRequest, HookToDownloader, isObject, MAX_UPCOMING, UpcomingSegment } from '../common/messages';
import { ByteRangeSpec } from '../common/media';

/**
 * A request the relay may forward, or why not (the hook sends it to the network instead). With
 * `consent`, the origin's CORS answer is still coming: the request goes at once and its answer
 * is held until consent says yes (no: the download is cancelled and the hook told 'cors'), so the
 * consent round trip runs beside the transfer instead of before it, and no byte reaches the page
 * before it.
 */
export type Authorization =
  { ok: true; request: GetRequest; consent?: Promise<boolean> } | { ok: false; reason: string };

export interface RelayDeps {
  /** Checks a request from the hook (already shape-checked) and gives the one to forward. */
  authorize(request: GetRequest): Promise<Authorization>;
  /** The hello the downloader gets (session and page URL known to the content script). */
  hello(): { session: string; pageUrl: string };
}

const MAX_PENDING = 256;

export class DownloaderRelay {
  /** Requests still being authorised (a cancel before the answer drops them). */
  private readonly authorizing = new Set<number>();
  /** Forwarded requests whose consent is still coming, with their answer once it came first. */
  private readonly awaitingConsent = new Map<number, { result?: { data: unknown; transfer: Transferable[] } }>();
  /** Requests consent was refused for: an answer the downloader still sends is dropped. */
  private readonly denied = new Set<number>();

  constructor(
    private readonly hookPort: MessagePort,
    private readonly downloaderPort: MessagePort,
    private readonly deps: RelayDeps,
  ) {
    hookPort.onmessage = (event: MessageEvent) => this.fromHook(event.data);
    downloaderPort.onmessage = (event: MessageEvent) => this.fromDownloader(event.data);
  }

  close(): void {
    this.hookPort.close();
    this.downloaderPort.close();
  }

  private fromHook(data: unknown): void {
    if (!isObject(data)) return;
    const m = data as unknown as HookToDownloader;
    if (m.type === 'hello') {
      this.toDownloader({ type: 'hello', ...this.deps.hello() });
    } else if (m.type === 'cancel' && typeof m.id === 'number') {
      this.awaitingConsent.delete(m.id);
      if (!this.authorizing.delete(m.id)) this.toDownloader({ type: 'cancel', id: m.id });
    } else if (m.type === 'get') {
      this.authorizeAndForward(m);
    }
  }

  private authorizeAndForward(m: GetRequest): void {
    const request = shapeOf(m);
    if (!request) return this.refuse(typeof m.id === 'number' ? m.id : -1, 'bad-request');
    if (this.authorizing.size >= MAX_PENDING) return this.refuse(request.id, 'busy');
    this.authorizing.add(request.id);
    this.deps
      .authorize(request)
      .catch((): Authorization => ({ ok: false, reason: 'internal' }))
      .then((verdict) => {
        if (!this.authorizing.delete(request.id)) return; // cancelled meanwhile
        if (!verdict.ok) return this.refuse(request.id, verdict.reason);
        if (verdict.consent !== undefined) this.gate(request.id, verdict.consent);
        this.toDownloader(verdict.request);
      });
  }

  /** Holds the answer of request `id` until `consent` settles; a no cancels it and tells the hook. */
  private gate(id: number, consent: Promise<boolean>): void {
    const entry: { result?: { data: unknown; transfer: Transferable[] } } = {};
    this.awaitingConsent.set(id, entry);
    void consent
      .catch(() => false)
      .then((ok) => {
        if (this.awaitingConsent.get(id) !== entry) return; // cancelled by the hook meanwhile
        this.awaitingConsent.delete(id);
        if (!ok) {
          if (entry.result === undefined) {
            this.toDownloader({ type: 'cancel', id });
            this.denied.add(id);
            // Bounded: a downloader that never answers a cancel must not grow this.
            if (this.denied.size > MAX_PENDING) this.denied.delete(this.denied.values().next().value!);
          }
          return this.refuse(id, 'cors');
        }
        if (entry.result !== undefined) this.toHook(entry.result.data, entry.result.transfer);
      });
  }

  private fromDownloader(data: unknown): void {
    if (!isObject(data)) return;
    if (data.type === 'ready') this.toHook({ type: 'ready' });
    else if (data.type === 'result' && typeof data.id === 'number') {
      const transfer = data.ok === true && data.body instanceof ArrayBuffer ? [data.body] : [];
      const held = this.awaitingConsent.get(data.id);
      if (held !== undefined) held.result = { data, transfer };
      else if (!this.denied.delete(data.id)) this.toHook(data, transfer);
    }
  }

  private refuse(id: number, reason: string): void {
    const failure: GetFailure = { type: 'result', id, ok: false, reason, message: reason };
    this.toHook(failure);
  }

  private toHook(message: unknown, transfer: Transferable[] = []): void {
    try {
      this.hookPort.postMessage(message, transfer);
    } catch {
      // the page went away
    }
  }

  private toDownloader(message: HookToDownloader): void {
    try {
      this.downloaderPort.postMessage(message);
    } catch {
      // the frame went away: the hook's deadline sends the request to the network
    }
  }
}

/** A plain copy of the fields a GetRequest may have, or undefined when they are not well-formed. */
function shapeOf(m: GetRequest): GetRequest | undefined {
  if (!Number.isSafeInteger(m.id) || typeof m.url !== 'string') return undefined;
  const request: GetRequest = { type: 'get', id: m.id, url: m.url, mode: m.mode, proxies: m.proxies };
  if (typeof m.duration === 'number' && Number.isFinite(m.duration) && m.duration >= 0) request.duration = m.duration;
  if (m.range !== undefined) {
    const range = rangeOf(m.range);
    if (!range) return undefined;
    request.range = range;
  }
  // Staging is only a hint: a malformed list is dropped, the request itself still goes.
  const upcoming = upcomingOf(m.upcoming);
  if (upcoming && typeof m.track === 'string' && m.track.length <= MAX_URL_CHARS) {
    request.upcoming = upcoming;
    request.track = m.track;
  }
  return request;
}

const MAX_URL_CHARS = 8192;

function upcomingOf(list: unknown): UpcomingSegment[] | undefined {
  if (!Array.isArray(list) || list.length > MAX_UPCOMING) return undefined;
  const out: UpcomingSegment[] = [];
  for (const item of list as unknown[]) {
    if (!isObject(item) || typeof item.url !== 'string' || item.url.length > MAX_URL_CHARS) return undefined;
    const segment: UpcomingSegment = { url: item.url };
    if (item.range !== undefined) {
      const r = item.range;
      if (!isObject(r) || !Number.isSafeInteger(r.start) || !Number.isSafeInteger(r.length)) return undefined;
      if ((r.start as number) < 0 || (r.length as number) <= 0) return undefined;
      segment.range = { start: r.start as number, length: r.length as number };
    }
    out.push(segment);
  }
  return out;
}

function rangeOf(r: unknown): ByteRangeSpec | undefined {
  if (!isObject(r)) return undefined;
  if (r.kind === 'from' && Number.isSafeInteger(r.start) && (r.start as number) >= 0) {
    if (r.end === undefined) return { kind: 'from', start: r.start as number };
    if (Number.isSafeInteger(r.end) && (r.end as number) >= (r.start as number))
      return { kind: 'from', start: r.start as number, end: r.end as number };
    return undefined;
  }
  if (r.kind === 'suffix' && Number.isSafeInteger(r.length) && (r.length as number) >= 0)
    return { kind: 'suffix', length: r.length as number };
  return undefined;
}
