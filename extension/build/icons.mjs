// The extension's icons, drawn at build time (no artwork files): three sources on the left whose
// lines meet in one receiver on the right, white on the accent blue of the popup (#1f6feb), as
// PNG at the sizes the manifest names. Shapes are signed distances, 4 × 4 supersampled.
import { Buffer } from 'node:buffer';
import { crc32, deflateSync } from 'node:zlib';

export const ICON_SIZES = [16, 32, 48, 128];

const BLUE = [0x1f, 0x6f, 0xeb];
const WHITE = [0xff, 0xff, 0xff];
const SOURCES = [
  [0.27, 0.27],
  [0.27, 0.5],
  [0.27, 0.73],
];
const RECEIVER = [0.72, 0.5];

function segmentDistance(px, py, [ax, ay], [bx, by]) {
  const dx = bx - ax;
  const dy = by - ay;
  const t = Math.max(0, Math.min(1, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)));
  return Math.hypot(px - (ax + t * dx), py - (ay + t * dy));
}

/** What covers the point (x, y) of the unit square: 'none', 'blue' or 'white'. */
function shade(x, y, size) {
  const radius = 0.2;
  const qx = Math.max(Math.abs(x - 0.5) - (0.5 - radius), 0);
  const qy = Math.max(Math.abs(y - 0.5) - (0.5 - radius), 0);
  if (Math.hypot(qx, qy) > radius) return 'none';
  // Thicker strokes at small sizes, so 16 px still shows them.
  const stroke = size <= 16 ? 0.075 : size <= 32 ? 0.06 : 0.045;
  if (Math.hypot(x - RECEIVER[0], y - RECEIVER[1]) < 0.15) return 'white';
  for (const s of SOURCES) {
    if (Math.hypot(x - s[0], y - s[1]) < 0.085) return 'white';
    if (segmentDistance(x, y, s, RECEIVER) < stroke) return 'white';
  }
  return 'blue';
}

/** RGBA pixels of the icon at `size` × `size`. */
export function iconPixels(size) {
  const n = 4;
  const out = Buffer.alloc(size * size * 4);
  for (let py = 0; py < size; py++) {
    for (let px = 0; px < size; px++) {
      let blue = 0;
      let white = 0;
      for (let sy = 0; sy < n; sy++) {
        for (let sx = 0; sx < n; sx++) {
          const s = shade((px + (sx + 0.5) / n) / size, (py + (sy + 0.5) / n) / size, size);
          if (s === 'blue') blue++;
          else if (s === 'white') white++;
        }
      }
      const covered = blue + white;
      const i = (py * size + px) * 4;
      if (covered === 0) continue;
      for (let c = 0; c < 3; c++) out[i + c] = Math.round((BLUE[c] * blue + WHITE[c] * white) / covered);
      out[i + 3] = Math.round((255 * covered) / (n * n));
    }
  }
  return out;
}

function chunk(type, data) {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** A PNG (8-bit RGBA, no interlace) of `rgba` pixels. */
export function encodePng(width, height, rgba) {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 6; // RGBA
  const rows = Buffer.alloc((width * 4 + 1) * height);
  for (let y = 0; y < height; y++) {
    rows[y * (width * 4 + 1)] = 0; // filter: none
    rgba.copy(rows, y * (width * 4 + 1) + 1, y * width * 4, (y + 1) * width * 4);
  }
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([
    signature,
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** `icons/icon-<size>.png` → PNG bytes, for every size. */
export function iconFiles() {
  return Object.fromEntries(ICON_SIZES.map((s) => [`icons/icon-${s}.png`, encodePng(s, s, iconPixels(s))]));
}

/** The manifest's `icons` (and `action.default_icon`) object. */
export function iconManifest() {
  return Object.fromEntries(ICON_SIZES.map((s) => [String(s), `icons/icon-${s}.png`]));
}
