/**
 * Player pages that address media by byte range (issue 14), served by the page server in
 * player-pages.ts beside the hls.js/dash.js pages and reporting through the same
 * `window.__player.state()`, with a few more fields ({@link RangePlayerState}):
 *
 * - `/shaka.html?player=shaka&src=<MPD>`: shaka-player 5 (from node_modules). With a SegmentBase
 *   MPD it fetches the init + `sidx` ranges and then media ranges of one file per representation
 *   with `Range` headers; with a per-segment MPD it fetches whole segment files. Every segment
 *   response is hashed (SHA-256) in a networking-engine response filter, with the range the
 *   request named.
 * - `/mse.html?player=mse&src=<fragmented MP4>`: a hand-written Media Source player. It fetches
 *   the head of the file (`Range: bytes=0-65535`, more if the boxes run past it), reads `ftyp` +
 *   `moov` (appended as the init segment) and the first `sidx` (the video track's: its references
 *   are the file's fragments, each one `moof` + `mdat` holding both tracks), then fetches each
 *   fragment with `fetch(src, {headers: {Range: 'bytes=a-b'}})` and appends it to one
 *   SourceBuffer. It keeps at most `ahead` seconds (default 12) buffered past the playhead and
 *   removes what lies more than `behind` seconds (default 10) behind it or far ahead of it after
 *   a seek, so the page holds a bounded amount of media however long the file. A seek into
 *   unbuffered time restarts fetching at the fragment holding the new position. Options:
 *   `type` (MSE type, default muxed H.264 main + AAC-LC), `ahead`, `behind`, `rate`
 *   (playbackRate), `afterHook=1` (first wait, at most 3 s, for the extension's hook to have its
 *   settings: `window.__mutp`, which needs exposeCounters).
 *
 * Start-up is reported as `firstRequestAt` (the first range asked for: the MSE page's head with
 * the sidx, shaka's first init/index/segment request) and `firstAppendAt` (the first media
 * fragment appended, after init), both in ms since the page script started, as are the `playing`
 * events the other pages report.
 */
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import { Counters, pageCounters, PlayerState, playerState, totalFallbacks, waitFor } from './browser';
import { FRESH_ALIAS, type Origin } from './origin';

/** What the range pages add to the player pages' state. */
export interface RangePlayerState extends PlayerState {
  loaded: (PlayerState['loaded'][number] & {
    /** inclusive, "a-b", when the request named a range */ range?: string;
  })[];
  /** ms since the page script started: first media request / first media appended. */
  firstRequestAt: number | null;
  firstAppendAt: number | null;
  /** Media bytes appended to SourceBuffers (MSE page), and requests made. */
  appendedBytes: number;
  requests: number;
  /** Largest total of buffered seconds seen (MSE page: bounded by ahead + behind + a fragment). */
  maxBufferedSeconds: number;
  /** Seconds of media removed behind (or far ahead of) the playhead. */
  removedSeconds: number;
  /** The resource's length from Content-Range (MSE page). */
  completeLength: number | null;
  /** Fragments the sidx lists (MSE page). */
  fragments: number;
}

/** Playback events, stall counting, hashing and `window.__player`: shared by both pages. */
const COMMON_SCRIPT = String.raw`
const params = new URLSearchParams(location.search);
const src = params.get('src');
const video = document.getElementById('v');
const t0 = performance.now();
const now = () => Math.round(performance.now() - t0);
const state = {
  player: params.get('player'), src, started: false, ended: false, stalls: 0, stalledEvents: 0,
  events: [], errors: [], warnings: [], loaded: [], hashing: 0,
  firstRequestAt: null, firstAppendAt: null, appendedBytes: 0, requests: 0, maxBufferedSeconds: 0,
  removedSeconds: 0, completeLength: null, fragments: 0,
};
const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
/** Hashes a copy of the bytes a request got (the player may transfer or reuse the buffer). */
const hashBody = (url, body, range) => {
  let copy;
  if (body instanceof ArrayBuffer) copy = body.slice(0);
  else if (ArrayBuffer.isView(body)) copy = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength);
  else {
    state.errors.push('no bytes for ' + url + ': ' + Object.prototype.toString.call(body));
    return;
  }
  const at = now();
  state.hashing++;
  crypto.subtle.digest('SHA-256', copy).then(
    (d) => state.loaded.push(Object.assign(
      { url: new URL(url, location.href).href, bytes: copy.byteLength, sha256: hex(d), at },
      range ? { range } : {},
    )),
    (e) => state.errors.push('digest ' + url + ': ' + e),
  ).finally(() => state.hashing--);
};
const bufferedSeconds = () => {
  let s = 0;
  for (let i = 0; i < video.buffered.length; i++) s += video.buffered.end(i) - video.buffered.start(i);
  return s;
};
const event = (name) => video.addEventListener(name, () => {
  if (state.events.length < 500) state.events.push([name, Math.round(video.currentTime * 1000) / 1000, now()]);
});
['loadedmetadata', 'canplay', 'playing', 'waiting', 'stalled', 'seeking', 'seeked', 'ended', 'pause'].forEach(event);
video.addEventListener('playing', () => { state.started = true; });
video.addEventListener('waiting', () => { if (state.started && !video.seeking && !video.ended) state.stalls++; });
video.addEventListener('stalled', () => { state.stalledEvents++; });
video.addEventListener('ended', () => { state.ended = true; });
video.addEventListener('progress', () => { state.maxBufferedSeconds = Math.max(state.maxBufferedSeconds, bufferedSeconds()); });
video.addEventListener('error', () => state.errors.push('video: ' + (video.error ? video.error.code + ' ' + video.error.message : '?')));
const rate = Number(params.get('rate') || 1);
video.addEventListener('loadedmetadata', () => { video.playbackRate = rate; });
window.__player = {
  state: () => Object.assign({}, state, {
    currentTime: video.currentTime,
    duration: video.duration,
    readyState: video.readyState,
    paused: video.paused,
    ended: video.ended || state.ended,
    maxBufferedSeconds: Math.max(state.maxBufferedSeconds, bufferedSeconds()),
  }),
};
`;

const SHAKA_SCRIPT = String.raw`
(async () => {
${COMMON_SCRIPT}
  shaka.polyfill.installAll();
  if (!shaka.Player.isBrowserSupported()) {
    state.errors.push('shaka: browser not supported');
    return;
  }
  const player = new shaka.Player();
  window.__shaka = player;
  const SEGMENT = shaka.net.NetworkingEngine.RequestType.SEGMENT;
  const engine = player.getNetworkingEngine();
  engine.registerRequestFilter((type) => {
    if (type === SEGMENT && state.firstRequestAt === null) state.firstRequestAt = now();
    if (type === SEGMENT) state.requests++;
  });
  engine.registerResponseFilter((type, response) => {
    if (type !== SEGMENT) return;
    const header = response.originalRequest && (response.originalRequest.headers.Range || response.originalRequest.headers.range);
    const m = /^bytes=(\d+)-(\d*)$/.exec(header || '');
    const bytes = response.data.byteLength;
    hashBody(response.uri, response.data, m ? m[1] + '-' + (Number(m[1]) + bytes - 1) : undefined);
    if (m && m[2] !== '' && Number(m[2]) - Number(m[1]) + 1 !== bytes)
      state.errors.push('shaka: asked ' + header + ', got ' + bytes + ' bytes of ' + response.uri);
  });
  player.addEventListener('segmentappended', (e) => {
    if (state.firstAppendAt === null && !e.isInit) state.firstAppendAt = now();
  });
  player.addEventListener('error', (e) => {
    const d = e.detail || {};
    state.errors.push('shaka: ' + d.severity + ' ' + d.code + ' ' + JSON.stringify(d.data || []).slice(0, 300));
  });
  try {
    await player.attach(video);
    await player.load(src);
  } catch (e) {
    state.errors.push('shaka load: ' + (e && e.code ? e.code + ' ' + JSON.stringify(e.data || []).slice(0, 300) : e));
    return;
  }
  video.play().catch((e) => state.warnings.push('play(): ' + e));
})();
`;

const MSE_SCRIPT = String.raw`
(async () => {
${COMMON_SCRIPT}
  const type = params.get('type') || 'video/mp4; codecs="avc1.4d401f,mp4a.40.2"';
  const aheadS = Number(params.get('ahead') || 12);
  const behindS = Number(params.get('behind') || 10);
  const HEAD_BYTES = 65536;

  /** One range of src; rejects unless the answer is exactly bytes start..end (end clipped at the file's end). */
  async function fetchRange(start, end) {
    if (state.firstRequestAt === null) state.firstRequestAt = now();
    state.requests++;
    const r = await fetch(src, { headers: { Range: 'bytes=' + start + '-' + end } });
    if (r.status !== 206) throw new Error('HTTP ' + r.status + ' for bytes=' + start + '-' + end);
    const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(r.headers.get('content-range') || '');
    if (!m || Number(m[1]) !== start || Number(m[2]) > end)
      throw new Error('Content-Range ' + r.headers.get('content-range') + ' for bytes=' + start + '-' + end);
    if (m[3] !== '*') state.completeLength = Number(m[3]);
    const body = await r.arrayBuffer();
    if (body.byteLength !== Number(m[2]) - start + 1)
      throw new Error(body.byteLength + ' bytes for Content-Range ' + r.headers.get('content-range'));
    hashBody(src, body, start + '-' + m[2]);
    return body;
  }

  /** ftyp + moov (the init segment) and the fragments the first sidx lists. */
  async function readIndex() {
    let head = new Uint8Array(await fetchRange(0, HEAD_BYTES - 1));
    const need = async (end) => {
      if (end <= head.length) return;
      const more = new Uint8Array(await fetchRange(head.length, end - 1));
      const joined = new Uint8Array(head.length + more.length);
      joined.set(head);
      joined.set(more, head.length);
      head = joined;
    };
    const u32 = (p) => new DataView(head.buffer).getUint32(p);
    let initEnd = 0;
    for (let off = 0; ; ) {
      await need(off + 8);
      const size = u32(off);
      const box = String.fromCharCode(...head.subarray(off + 4, off + 8));
      if (size < 8) throw new Error('box ' + box + ' at ' + off + ': size ' + size + ' (no sidx before it)');
      if (box === 'moov') initEnd = off + size;
      if (box === 'moof' || box === 'mdat') throw new Error('no sidx before the first fragment');
      if (box !== 'sidx') { off += size; continue; }
      await need(off + size);
      if (!initEnd) throw new Error('sidx before moov');
      const version = head[off + 8];
      const timescale = u32(off + 16);
      let p = off + 20;
      const u64 = (q) => u32(q) * 2 ** 32 + u32(q + 4);
      const earliest = version === 0 ? u32(p) : u64(p);
      const firstOffset = version === 0 ? u32(p + 4) : u64(p + 8);
      p += version === 0 ? 8 : 16;
      const count = new DataView(head.buffer).getUint16(p + 2);
      p += 4;
      const fragments = [];
      let at = off + size + firstOffset;
      let t = earliest;
      for (let i = 0; i < count; i++, p += 12) {
        const ref = u32(p);
        const dur = u32(p + 4);
        if (ref >>> 31) throw new Error('hierarchical sidx (reference_type 1) is not read');
        const bytes = ref & 0x7fffffff;
        fragments.push({ start: at, end: at + bytes - 1, t0: t / timescale, t1: (t + dur) / timescale });
        at += bytes;
        t += dur;
      }
      return { init: head.slice(0, initEnd).buffer, fragments };
    }
  }

  // afterHook=1 (tests, with the extension's exposeCounters): wait for the hook's settings (at most
  // 3 s) before the first request. Otherwise a request made at once at page load can beat them
  // and go to the network as 'not-ready'.
  if (params.get('afterHook') === '1') {
    for (let i = 0; i < 60 && !window.__mutp; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const ms = new MediaSource();
  video.src = URL.createObjectURL(ms);
  await new Promise((resolve) => ms.addEventListener('sourceopen', resolve, { once: true }));
  const sb = ms.addSourceBuffer(type);
  const settle = (start) => new Promise((resolve, reject) => {
    const done = () => { sb.removeEventListener('error', fail); resolve(); };
    const fail = () => { sb.removeEventListener('updateend', done); reject(new Error('SourceBuffer error')); };
    sb.addEventListener('updateend', done, { once: true });
    sb.addEventListener('error', fail, { once: true });
    start();
  });
  const append = (buf) => settle(() => sb.appendBuffer(buf));
  const remove = (a, b) => { state.removedSeconds += b - a; return settle(() => sb.remove(a, b)); };
  const rangeAt = (t) => {
    for (let i = 0; i < sb.buffered.length; i++)
      if (sb.buffered.start(i) <= t + 0.1 && t < sb.buffered.end(i)) return [sb.buffered.start(i), sb.buffered.end(i)];
    return null;
  };

  try {
    const { init, fragments } = await readIndex();
    state.fragments = fragments.length;
    await append(init);
    ms.duration = fragments[fragments.length - 1].t1;
    video.play().catch((e) => state.warnings.push('play(): ' + e));
    const fragmentAt = (t) => {
      const i = fragments.findIndex((f) => f.t1 > t + 0.05);
      return i < 0 ? fragments.length : i;
    };
    let next = 0;
    for (;;) {
      const t = video.currentTime;
      const here = rangeAt(t);
      // A seek into unbuffered time: fetch from the fragment that holds the new position.
      if (!here && fragmentAt(t) !== next) next = fragmentAt(t);
      const bufferedTo = here ? here[1] : t;
      // Bounded memory, before anything new is fetched: drop what is well behind the playhead, and
      // ranges far ahead of it (left by seeks).
      for (let i = sb.buffered.length - 1; i >= 0; i--) {
        const a = sb.buffered.start(i);
        const b = sb.buffered.end(i);
        if (a > t + aheadS + 10) await remove(a, b);
        else if (a < t - behindS - 2) await remove(a, Math.min(b, t - behindS));
      }
      if (next < fragments.length && bufferedTo - t < aheadS) {
        const f = fragments[next];
        const body = await fetchRange(f.start, f.end);
        await append(body);
        state.appendedBytes += body.byteLength;
        if (state.firstAppendAt === null) state.firstAppendAt = now();
        next++;
        state.maxBufferedSeconds = Math.max(state.maxBufferedSeconds, bufferedSeconds());
        continue;
      }
      if (next >= fragments.length && ms.readyState === 'open' && here && here[1] >= ms.duration - 0.5) ms.endOfStream();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } catch (e) {
    state.errors.push('mse: ' + (e && e.message ? e.message : e));
  }
})();
`;

export function rangePageHtml(player: 'shaka' | 'mse', lib?: string): string {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>MUTP e2e ${player} range player</title>
${lib ? `<script src="${lib}"></script>` : ''}
</head><body>
<video id="v" muted playsinline autoplay width="640" height="360"></video>
<script>${player === 'shaka' ? SHAKA_SCRIPT : MSE_SCRIPT}</script>
</body></html>`;
}

// ------------------------------------------------------------- Node side: checking what a page got

/** What the file holds at `range` ("a-b", inclusive; the whole file without one). */
export function fileDigest(file: string, range?: string): { bytes: number; sha256: string } | undefined {
  if (!existsSync(file)) return undefined;
  const size = statSync(file).size;
  const m = range ? /^(\d+)-(\d+)$/.exec(range) : null;
  if (range && !m) return undefined;
  const start = m ? Number(m[1]) : 0;
  const end = m ? Math.min(Number(m[2]), size - 1) : size - 1;
  const hash = createHash('sha256');
  const fd = openSync(file, 'r');
  try {
    // In pieces: the large file's ranges are read where they are, not the file whole.
    const chunk = Buffer.alloc(1 << 20);
    for (let at = start; at <= end;) {
      const n = readSync(fd, chunk, 0, Math.min(chunk.length, end - at + 1), at);
      if (n <= 0) break;
      hash.update(chunk.subarray(0, n));
      at += n;
    }
  } finally {
    closeSync(fd);
  }
  return { bytes: Math.max(0, end - start + 1), sha256: hash.digest('hex') };
}

/**
 * Every object or range the page got, compared with the origin's file under `mediaDir` (by URL
 * path): the mismatches, as readable lines (empty when every byte is the origin's).
 */
export function byteMismatches(state: RangePlayerState, mediaDir: string): string[] {
  const out: string[] = [];
  const digests = new Map<string, ReturnType<typeof fileDigest>>();
  for (const l of state.loaded) {
    const path = decodeURIComponent(new URL(l.url).pathname).replace(FRESH_ALIAS, '/');
    const key = `${path} ${l.range ?? ''}`;
    if (!digests.has(key)) digests.set(key, fileDigest(join(mediaDir, path), l.range));
    const want = digests.get(key);
    if (!want) out.push(`${key}: no such file or range`);
    else if (want.bytes !== l.bytes || want.sha256 !== l.sha256)
      out.push(
        `${key}: got ${l.bytes} bytes ${l.sha256.slice(0, 12)}, file has ${want.bytes} ${want.sha256.slice(0, 12)}`,
      );
  }
  return out;
}

/** Body bytes the proxies (by User-Agent) fetched from the origin in these log entries. */
export function proxyOriginBytes(log: Origin['log']): { requests: number; bytes: number } {
  const fetched = log.filter((r) => r.method === 'GET' && r.userAgent.startsWith('mutp-proxy/'));
  return { requests: fetched.length, bytes: fetched.reduce((a, r) => a + r.bytes, 0) };
}

/** Media the browser itself fetched from the origin (GETs not made by a proxy; HEADs are CORS checks). */
export function browserMediaRequests(log: Origin['log']): string[] {
  return log
    .filter((r) => r.method !== 'HEAD' && /\.(ts|m4s|mp4)$/.test(r.path) && !r.userAgent.startsWith('mutp-proxy/'))
    .map((r) => `${r.path}${r.range ? ` ${r.range}` : ''}`);
}

/**
 * Pauses the page's video and waits until nothing is in flight: every body hashed, and the
 * hook's counters balanced (media = served + aborted + fallbacks) with one hashed response per
 * served request. Players keep fetching ahead while they play, so a snapshot taken mid-request
 * would count a request the page has not got yet.
 */
export async function pauseAndSettle(
  page: Page,
  timeoutMs = 20_000,
): Promise<{ state: RangePlayerState; counters?: Counters }> {
  await page.evaluate(() => {
    const doc = (globalThis as unknown as { document: { querySelector(s: string): { pause(): void } | null } })
      .document;
    doc.querySelector('video')?.pause();
  });
  let last: { state: RangePlayerState; counters?: Counters } | undefined;
  return waitFor(
    'the page to settle (no request in flight, every body hashed)',
    async () => {
      const state = (await playerState(page)) as RangePlayerState;
      const counters = await pageCounters(page);
      last = { state, counters };
      if (state.hashing > 0) return undefined;
      if (!counters) return last; // no extension: nothing to balance
      const settled = counters.served + counters.aborted + totalFallbacks(counters);
      return counters.media === settled ? last : undefined;
    },
    timeoutMs,
    200,
  ).catch((e: unknown) => {
    if (last) return last; // reported by the caller's checks, with the counters as they were
    throw e;
  });
}
