/**
 * Segment lists from HLS and DASH manifests (m3u8-parser, mpd-parser), with every URI resolved
 * against the manifest's own URL (after redirects), and the registry the interception decision
 * looks requests up in.
 */
import { Parser as M3u8Parser } from 'm3u8-parser';
import { parse as parseMpd } from 'mpd-parser';
import { ManifestKind, normalizeUrl, sniffManifest } from '../common/media';
import { declaredDashSegments, MAX_DECLARED_DASH_SEGMENTS } from './mpd-budget';

export type SegmentKind = 'media' | 'init' | 'index';

export interface SegmentRef {
  /** Absolute URL without fragment. */
  url: string;
  kind: SegmentKind;
  /** Seconds of media (media segments, when the manifest says). */
  duration?: number;
  /** A byte range of `url` (EXT-X-BYTERANGE, DASH mediaRange/indexRange/Initialization@range). */
  byteRange?: { offset: number; length: number };
  /**
   * Which of the manifest's playlists (DASH representations) lists it, counted from 0: segments
   * of one track follow each other in play order.
   */
  track: number;
}

export interface ManifestInfo {
  kind: ManifestKind;
  segments: SegmentRef[];
  /** Manifests this one points to (HLS master playlist variants and renditions). */
  manifests: string[];
}

/** Bounds what one manifest can make us remember (a hostile or huge playlist). */
export const MAX_SEGMENTS_PER_MANIFEST = 20_000;

interface ByteRangeLike {
  offset?: number;
  length?: number;
}

function byteRange(r: ByteRangeLike | undefined): SegmentRef['byteRange'] {
  if (!r || typeof r.length !== 'number' || !(r.length > 0)) return undefined;
  const offset = typeof r.offset === 'number' && r.offset >= 0 ? r.offset : 0;
  return { offset, length: r.length };
}

class Collector {
  readonly segments: SegmentRef[] = [];
  readonly manifests: string[] = [];
  private readonly seen = new Set<string>();

  /** The track segments added now belong to (DASH: one per representation). */
  track = 0;

  constructor(private readonly base: string) {}

  add(uri: unknown, kind: SegmentKind, extra: { duration?: number; byteRange?: ByteRangeLike } = {}): void {
    if (typeof uri !== 'string' || uri === '' || this.segments.length >= MAX_SEGMENTS_PER_MANIFEST) return;
    const url = normalizeUrl(uri, this.base);
    if (!url || !/^https?:/.test(url)) return;
    const range = byteRange(extra.byteRange);
    const key = `${kind} ${url} ${range ? `${range.offset}+${range.length}` : ''}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    const ref: SegmentRef = { url, kind, track: this.track };
    if (typeof extra.duration === 'number' && Number.isFinite(extra.duration) && extra.duration > 0) {
      ref.duration = extra.duration;
    }
    if (range) ref.byteRange = range;
    this.segments.push(ref);
  }

  addManifest(uri: unknown): void {
    if (typeof uri !== 'string' || uri === '' || this.manifests.length >= 1000) return;
    const url = normalizeUrl(uri, this.base);
    if (url && /^https?:/.test(url) && !this.manifests.includes(url)) this.manifests.push(url);
  }
}

// ------------------------------------------------------------------------------------------ HLS

interface HlsSegmentLike {
  uri?: string;
  duration?: number;
  byterange?: ByteRangeLike;
  map?: { uri?: string; byterange?: ByteRangeLike };
  parts?: { URI?: unknown; BYTERANGE?: ByteRangeLike; DURATION?: unknown }[];
}

/** Segments (and child playlists) of an HLS media or master playlist. */
export function extractHls(text: string, manifestUrl: string): ManifestInfo {
  const parser = new M3u8Parser();
  parser.push(text);
  parser.end();
  const m = parser.manifest as unknown as {
    segments?: HlsSegmentLike[];
    playlists?: { uri?: string }[];
    iFramePlaylists?: { uri?: string }[];
    mediaGroups?: Record<string, Record<string, Record<string, { uri?: string }>>>;
    preloadSegment?: HlsSegmentLike;
  };
  const c = new Collector(manifestUrl);
  const segments = [...(m.segments ?? [])];
  if (m.preloadSegment) segments.push(m.preloadSegment);
  for (const s of segments) {
    if (s.map) c.add(s.map.uri, 'init', { byteRange: s.map.byterange });
    c.add(s.uri, 'media', { duration: s.duration, byteRange: s.byterange });
    for (const part of s.parts ?? []) {
      c.add(part.URI, 'media', {
        duration: typeof part.DURATION === 'number' ? part.DURATION : undefined,
        byteRange: part.BYTERANGE,
      });
    }
  }
  for (const p of m.playlists ?? []) c.addManifest(p.uri);
  for (const p of m.iFramePlaylists ?? []) c.addManifest(p.uri);
  for (const group of Object.values(m.mediaGroups ?? {})) {
    for (const renditions of Object.values(group ?? {})) {
      for (const r of Object.values(renditions ?? {})) c.addManifest(r?.uri);
    }
  }
  return { kind: 'hls', segments: c.segments, manifests: c.manifests };
}

// ----------------------------------------------------------------------------------------- DASH

interface DashSegmentLike {
  resolvedUri?: string;
  uri?: string;
  duration?: number;
  byterange?: ByteRangeLike;
  map?: { resolvedUri?: string; uri?: string; byterange?: ByteRangeLike };
}

interface DashPlaylistLike {
  resolvedUri?: string;
  segments?: DashSegmentLike[];
  sidx?: DashSegmentLike;
}

type DashGroups = Record<string, Record<string, { playlists?: DashPlaylistLike[] }> | undefined>;

/** Segments of a DASH MPD: SegmentTemplate, SegmentList, SegmentBase and BaseURL-only representations. */
export function extractDash(text: string, manifestUrl: string): ManifestInfo {
  if (!wellFormedXml(text)) throw new Error('the MPD is not well-formed XML');
  // One clock for the count and the parse, so a live window is counted as it will be listed.
  const now = Date.now();
  const declared = declaredDashSegments(text, manifestUrl, now);
  if (declared > MAX_DECLARED_DASH_SEGMENTS) throw new Error(`the MPD declares ${declared} segments`);
  const parsed = parseMpd(text, { manifestUri: manifestUrl, NOW: now }) as {
    playlists?: DashPlaylistLike[];
    mediaGroups?: Record<string, DashGroups>;
  };
  const c = new Collector(manifestUrl);
  const playlists: DashPlaylistLike[] = [...(parsed.playlists ?? [])];
  for (const type of ['AUDIO', 'VIDEO']) {
    for (const group of Object.values(parsed.mediaGroups?.[type] ?? {})) {
      for (const rendition of Object.values(group ?? {})) playlists.push(...(rendition?.playlists ?? []));
    }
  }
  const manifest = normalizeUrl(manifestUrl);
  for (const [track, p] of playlists.entries()) {
    c.track = track;
    for (const s of p.segments ?? []) {
      if (s.map) c.add(s.map.resolvedUri ?? s.map.uri, 'init', { byteRange: s.map.byterange });
      c.add(s.resolvedUri ?? s.uri, 'media', { duration: s.duration, byteRange: s.byterange });
    }
    if (p.sidx) {
      // SegmentBase: one file addressed by ranges (initialization, index, then media ranges from the index).
      if (p.sidx.map) c.add(p.sidx.map.resolvedUri ?? p.sidx.map.uri, 'init', { byteRange: p.sidx.map.byterange });
      c.add(p.sidx.resolvedUri ?? p.sidx.uri, 'index', { byteRange: p.sidx.byterange });
      c.add(p.sidx.resolvedUri ?? p.sidx.uri, 'media', { duration: p.sidx.duration });
    } else if ((p.segments ?? []).length === 0 && p.resolvedUri && normalizeUrl(p.resolvedUri) !== manifest) {
      // A representation that is a single file named by its BaseURL.
      c.add(p.resolvedUri, 'media');
    }
  }
  return { kind: 'dash', segments: c.segments, manifests: c.manifests };
}

/**
 * Checks with the browser's own XML parser first where there is one, so a broken MPD never
 * reaches xmldom (which writes its complaints to the page's console).
 */
function wellFormedXml(text: string): boolean {
  const Parser = (globalThis as { DOMParser?: typeof DOMParser }).DOMParser;
  if (typeof Parser !== 'function') return true;
  const doc = new Parser().parseFromString(text, 'application/xml');
  return doc.getElementsByTagName('parsererror').length === 0;
}

/** Parses a manifest body of either kind (judged from its first bytes); undefined when it is neither or does not parse. */
export function extractManifest(text: string, manifestUrl: string): ManifestInfo | undefined {
  try {
    switch (sniffManifest(text)) {
      case 'hls':
        return extractHls(text, manifestUrl);
      case 'dash':
        return extractDash(text, manifestUrl);
      default:
        return undefined;
    }
  } catch {
    return undefined;
  }
}

// ------------------------------------------------------------------------------------- registry

export interface SegmentInfo {
  kind: SegmentKind;
  duration?: number;
  /** The manifest that listed it. */
  manifest: string;
  /** True when the manifest addresses this URL by byte ranges (the request should carry Range). */
  ranged: boolean;
}

/** What comes after a media segment in its playlist (for staging). */
export interface Upcoming {
  /** The playlist: the manifest's URL, and the representation's index in a DASH MPD. */
  track: string;
  segments: { url: string; range?: { start: number; length: number } }[];
}

/** Playlists whose order the registry keeps (a player follows a few at once: video, audio, a switch). */
const MAX_TRACKS = 16;

/** A playlist's media segments in play order, and where each one sits in it. */
interface Track {
  segments: SegmentRef[];
  index: Map<string, number>;
}

/** One media segment: its URL, or its URL and the first byte of its range. */
function positionKey(url: string, offset?: number): string {
  return offset === undefined ? url : `${url}#${offset}`;
}

/**
 * URLs of media segments from the manifests the page loaded, bounded (oldest forgotten first:
 * live playlists keep adding segments), and the order of the last few playlists.
 */
export class SegmentRegistry {
  private readonly entries = new Map<string, SegmentInfo>();
  private readonly tracks = new Map<string, Track>();
  manifestsSeen = 0;

  constructor(private readonly capacity = 50_000) {}

  get size(): number {
    return this.entries.size;
  }

  addManifest(manifestUrl: string, info: ManifestInfo): void {
    this.manifestsSeen++;
    const byTrack = new Map<number, SegmentRef[]>();
    for (const s of info.segments) {
      const previous = this.entries.get(s.url);
      const entry: SegmentInfo = {
        kind: previous?.kind === 'media' ? 'media' : s.kind,
        duration: s.duration ?? previous?.duration,
        manifest: manifestUrl,
        ranged: (previous?.ranged ?? false) || s.byteRange !== undefined,
      };
      this.entries.delete(s.url); // re-insert: most recent last
      this.entries.set(s.url, entry);
      if (s.kind !== 'media') continue;
      const list = byTrack.get(s.track) ?? [];
      list.push(s);
      byTrack.set(s.track, list);
    }
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    // A refreshed playlist replaces its order (a live window moves on).
    for (const [n, segments] of byTrack) {
      const name = info.kind === 'dash' ? `${manifestUrl}#${n}` : manifestUrl;
      const index = new Map<string, number>();
      segments.forEach((s, i) => index.set(positionKey(s.url, s.byteRange?.offset), i));
      this.tracks.delete(name);
      this.tracks.set(name, { segments, index });
    }
    while (this.tracks.size > MAX_TRACKS) this.tracks.delete(this.tracks.keys().next().value as string);
  }

  lookup(url: string): SegmentInfo | undefined {
    return this.entries.get(url);
  }

  /**
   * The `max` media segments after the one at `url` (from byte `offset` of it, for a ranged
   * segment) in the most recent playlist listing it; undefined when no kept playlist does.
   */
  upcoming(url: string, offset: number | undefined, max: number): Upcoming | undefined {
    const key = positionKey(url, offset);
    // Most recent playlist first: after a stream switch the new rendition is the one playing.
    for (const [name, track] of [...this.tracks].reverse()) {
      const at = track.index.get(key);
      if (at === undefined) continue;
      const segments = track.segments
        .slice(at + 1, at + 1 + max)
        .map((s) =>
          s.byteRange
            ? { url: s.url, range: { start: s.byteRange.offset, length: s.byteRange.length } }
            : { url: s.url },
        );
      return { track: name, segments };
    }
    return undefined;
  }
}
