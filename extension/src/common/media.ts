/**
 * Byte ranges (RFC 9110 §14), media URL helpers and content types: pure functions shared by the
 * page hook and the downloader.
 */

/** A single-range `Range: bytes=...` request, before the object's length is known. */
export type ByteRangeSpec =
  | { kind: 'from'; start: number; end?: number } // bytes=a-b (end inclusive) or bytes=a-
  | { kind: 'suffix'; length: number }; // bytes=-n: the last n bytes

export type RangeParse = { ok: true; range: ByteRangeSpec } | { ok: false; reason: 'multi-range' | 'bad-range' };

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function parseNumber(s: string): number | undefined {
  if (!/^\d{1,16}$/.test(s)) return undefined;
  const n = Number(s);
  return n <= MAX_SAFE ? n : undefined;
}

/** Parses a Range header value; only single byte ranges are served (multipart is left to the network). */
export function parseRangeHeader(value: string): RangeParse {
  const m = /^\s*bytes\s*=\s*(.*)$/i.exec(value);
  if (!m) return { ok: false, reason: 'bad-range' };
  const parts = m[1].split(',').filter((p) => p.trim() !== '');
  if (parts.length > 1) return { ok: false, reason: 'multi-range' };
  if (parts.length === 0) return { ok: false, reason: 'bad-range' };
  const r = /^\s*(\d*)\s*-\s*(\d*)\s*$/.exec(parts[0]);
  if (!r || (r[1] === '' && r[2] === '')) return { ok: false, reason: 'bad-range' };
  if (r[1] === '') {
    const length = parseNumber(r[2]);
    return length === undefined ? { ok: false, reason: 'bad-range' } : { ok: true, range: { kind: 'suffix', length } };
  }
  const start = parseNumber(r[1]);
  if (start === undefined) return { ok: false, reason: 'bad-range' };
  if (r[2] === '') return { ok: true, range: { kind: 'from', start } };
  const end = parseNumber(r[2]);
  if (end === undefined || end < start) return { ok: false, reason: 'bad-range' };
  return { ok: true, range: { kind: 'from', start, end } };
}

/** The range a server would serve from an object of `total` bytes, or null (416 Range Not Satisfiable). */
export function resolveRange(range: ByteRangeSpec, total: number): { start: number; end: number } | null {
  if (total <= 0) return null;
  if (range.kind === 'suffix') {
    if (range.length === 0) return null;
    return { start: Math.max(0, total - range.length), end: total - 1 };
  }
  if (range.start >= total) return null;
  return { start: range.start, end: Math.min(range.end ?? total - 1, total - 1) };
}

export function contentRange(start: number, end: number, total: number): string {
  return `bytes ${start}-${end}/${total}`;
}

export function formatRange(range: ByteRangeSpec): string {
  return range.kind === 'suffix' ? `bytes=-${range.length}` : `bytes=${range.start}-${range.end ?? ''}`;
}

/** Absolute URL without its fragment (what is fetched, and the key segments are remembered by). */
export function normalizeUrl(url: string, base?: string): string | undefined {
  try {
    const u = base === undefined ? new URL(url) : new URL(url, base);
    u.hash = '';
    return u.href;
  } catch {
    return undefined;
  }
}

/** Lower-case extension of the URL's path (`.m4s`), or ''. */
export function pathExtension(url: string): string {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return '';
  }
  const m = /\.([A-Za-z0-9]{1,8})$/.exec(path);
  return m ? `.${m[1].toLowerCase()}` : '';
}

/** Files whose Range requests are media: progressive or segmented video/audio. */
export const MEDIA_FILE_EXTENSIONS: ReadonlySet<string> = new Set(['.mp4', '.webm', '.m4s', '.ts', '.m4v', '.m4a']);

const CONTENT_TYPES: Record<string, string> = {
  '.ts': 'video/mp2t',
  '.m4s': 'video/iso.segment',
  '.mp4': 'video/mp4',
  '.m4v': 'video/mp4',
  '.m4a': 'audio/mp4',
  '.mp4a': 'audio/mp4',
  '.cmfv': 'video/mp4',
  '.cmfa': 'audio/mp4',
  '.webm': 'video/webm',
  '.weba': 'audio/webm',
  '.aac': 'audio/aac',
  '.mp3': 'audio/mpeg',
  '.vtt': 'text/vtt',
  '.webvtt': 'text/vtt',
};

/**
 * The Content-Type given to a response served from MUTP. The protocol does not carry the
 * origin's header, so it is inferred from the path (Parallel HTTP results carry the real one).
 */
export function guessContentType(url: string): string {
  return CONTENT_TYPES[pathExtension(url)] ?? 'application/octet-stream';
}

/** Manifest formats the hook reads segment lists from. */
export type ManifestKind = 'hls' | 'dash';

/** What a URL or a Content-Type says about a manifest, before reading the body. */
export function manifestHint(url: string, contentType: string | null): ManifestKind | undefined {
  const ct = (contentType ?? '').toLowerCase();
  if (ct.includes('mpegurl')) return 'hls';
  if (ct.includes('dash+xml')) return 'dash';
  const ext = pathExtension(url);
  if (ext === '.m3u8' || ext === '.m3u') return 'hls';
  if (ext === '.mpd') return 'dash';
  return undefined;
}

/** The manifest format of a text body, judged from its first bytes. */
export function sniffManifest(text: string): ManifestKind | undefined {
  const head = text.slice(0, 512).replace(/^\uFEFF/, '');
  if (/^\s*#EXTM3U/.test(head)) return 'hls';
  if (/^\s*(<\?xml[^>]*>\s*)?(<!--[\s\S]*?-->\s*)*<MPD[\s>]/.test(head)) return 'dash';
  return undefined;
}

/**
 * A URL as the extension shows or records it: origin and path, without the query (signed tokens,
 * session ids), fragment or user info. The proxies still get the full URL: they must fetch it.
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`.slice(0, 1024);
  } catch {
    return '';
  }
}
