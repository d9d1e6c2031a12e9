/**
 * The segments `mutp playlist` downloads: from an HLS media playlist (m3u8-parser; segment URIs
 * resolved against the playlist's URL, EXT-X-BYTERANGE as byte ranges) or from a plain list of
 * URLs, one per line (`#` starts a comment).
 */
import { Parser } from 'm3u8-parser';
import type { SegmentRef } from '@mutp/shared/client';

/** Most segments one playlist may list (a live playlist is a window; a VOD one a few thousand). */
export const MAX_PLAYLIST_SEGMENTS = 100_000;

export class PlaylistError extends Error {
  override readonly name = 'PlaylistError';
}

/**
 * The segments of `text`, read from `base` (its URL; a local file's segments must be absolute
 * URLs). Throws a PlaylistError naming what is wrong.
 */
export function parsePlaylist(text: string, base?: string): SegmentRef[] {
  const segments = text.trimStart().startsWith('#EXTM3U') ? parseHls(text, base) : parseUrlList(text, base);
  if (segments.length === 0) throw new PlaylistError('the playlist lists no segment');
  if (segments.length > MAX_PLAYLIST_SEGMENTS) {
    throw new PlaylistError(`the playlist lists ${segments.length} segments, more than ${MAX_PLAYLIST_SEGMENTS}`);
  }
  return segments;
}

function parseHls(text: string, base: string | undefined): SegmentRef[] {
  const parser = new Parser();
  parser.push(text);
  parser.end();
  const manifest = parser.manifest;
  const variants = manifest.playlists ?? [];
  if (variants.length > 0) {
    const uris = variants.map((v) => v.uri).slice(0, 8);
    throw new PlaylistError(`a master playlist: pick one of its media playlists (${uris.join(', ')})`);
  }
  return (manifest.segments ?? []).map((s) => {
    const url = absolute(s.uri, base);
    return s.byterange ? { url, range: { start: s.byterange.offset, length: s.byterange.length } } : { url };
  });
}

function parseUrlList(text: string, base: string | undefined): SegmentRef[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => ({ url: absolute(line, base) }));
}

function absolute(uri: string, base: string | undefined): string {
  let url: URL;
  try {
    url = base !== undefined && /^https?:/i.test(base) ? new URL(uri, base) : new URL(uri);
  } catch {
    throw new PlaylistError(`${uri} is not an absolute URL (a playlist read from a file must list absolute URLs)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new PlaylistError(`${uri}: only http(s) segments can be downloaded`);
  }
  return url.href;
}
