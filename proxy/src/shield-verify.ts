/**
 * The evidence a shield child holds its parent's bytes against, all of it from the origin
 * directly and cheap: the version (the origin's validator, which the parent must have fetched
 * under), the extent (where the bytes sit, how many), the origin's Repr-Digest (RFC 9530) when it
 * sends one (every byte checked), else a few ranges chosen at random after the parent was asked
 * (a fraction of the bytes; the parent cannot know which).
 */
import { createHash } from 'node:crypto';
import { type ByteRange, validValidator } from '@mutp/shared';

/** Picks an integer in [0, maxExclusive): crypto.randomInt in production, seeded in tests. */
export type RandomInt = (maxExclusive: number) => number;

/**
 * `count` ranges inside `extent` (sorted, possibly overlapping), together about `fraction` of its
 * bytes and at least one byte each; none when the extent is empty.
 */
export function sampleRanges(extent: ByteRange, fraction: number, count: number, random: RandomInt): ByteRange[] {
  if (extent.length <= 0 || count <= 0) return [];
  const n = Math.min(count, extent.length);
  const size = Math.max(1, Math.floor((extent.length * fraction) / n));
  const ranges: ByteRange[] = [];
  for (let i = 0; i < n; i++) ranges.push({ start: extent.start + random(extent.length - size + 1), length: size });
  return ranges.sort((a, b) => a.start - b.start);
}

/** Where `sample` (bytes of the resource from `sample.start`) differs from `bytes` (which start at `bytesStart`). */
export function sampleMismatch(
  bytes: Uint8Array,
  bytesStart: number,
  sample: { start: number; bytes: Uint8Array },
): boolean {
  const offset = sample.start - bytesStart;
  if (offset < 0 || offset + sample.bytes.byteLength > bytes.byteLength) return true;
  return !Buffer.from(bytes.buffer, bytes.byteOffset + offset, sample.bytes.byteLength).equals(sample.bytes);
}

/**
 * The SHA-256 of a Repr-Digest header (RFC 9530: a structured dictionary, `sha-256=:<base64>:`),
 * undefined when it carries none (other algorithms are not used: sha-256 is the one a proxy
 * computes anyway).
 */
export function reprDigestSha256(header: string | undefined): Buffer | undefined {
  if (header === undefined || header.length > 1024) return undefined;
  for (const member of header.split(',')) {
    const m = /^\s*sha-256\s*=\s*:([A-Za-z0-9+/]+={0,2}):\s*$/.exec(member);
    if (!m) continue;
    const digest = Buffer.from(m[1], 'base64');
    if (digest.length === 32) return digest;
  }
  return undefined;
}

export function sha256Equals(bytes: Uint8Array, digest: Buffer): boolean {
  return createHash('sha256').update(bytes).digest().equals(digest);
}

/** The validator a cached copy is known by (cache-entry.ts provenance): a strong ETag, else Last-Modified. */
export function validatorOf(v: { etag?: string; lastModified?: string }): string | undefined {
  if (v.etag !== undefined && !v.etag.startsWith('W/') && validValidator(v.etag)) return `etag ${v.etag}`;
  if (v.lastModified !== undefined && validValidator(v.lastModified)) return `last-modified ${v.lastModified}`;
  return undefined;
}
