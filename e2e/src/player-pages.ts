/**
 * A small page server on 127.0.0.1 for the browser runs: a player page for hls.js 1.7 or
 * dash.js 5.2 (served from node_modules, no internet) that plays a stream from the media origin
 * (another port: the page and the media are cross-origin, as with a CDN) and reports what
 * happened through `window.__player.state()`:
 *
 * - playback: currentTime, `playing`/`waiting`/`stalled` events, rebuffering (`waiting` after the
 *   first `playing`), player and media errors;
 * - the bytes the player got for every media object, hashed (SHA-256) in the page at the
 *   player's own loader: hls.js through a fragment loader (`fLoader`) subclassing its default
 *   XHR loader whose success callback hashes `response.data` before hls.js sees it, with the
 *   loader's request and answer times (where no extension records can be read, as in Firefox,
 *   bench:browser's segment times come from them); dash.js
 *   through its public FRAGMENT_LOADING_COMPLETED event, which carries the response body. Each
 *   body is copied synchronously (hls.js may transfer it to its transmux worker afterwards).
 *
 * URL: /hls.html?player=hls&src=<manifest URL> (or dash.html). The byte-range pages (shaka-player,
 * a hand-written MSE player) are in range-pages.ts and served here too: /shaka.html, /mse.html.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { rangePageHtml } from './range-pages';

export type PageKind = 'hls' | 'dash' | 'shaka' | 'mse';

export interface PlayerPages {
  url: string;
  /** The player page for a manifest (the MSE page: a fragmented MP4), with extra page options. */
  playerUrl(player: PageKind, manifestUrl: string, options?: Record<string, string | number>): string;
  close(): Promise<void>;
}

/** A file of an installed package (its `exports` may hide package.json: look in node_modules). */
function packageFile(pkg: string, file: string): Buffer {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', pkg, file);
    if (existsSync(candidate)) return readFileSync(candidate);
    if (dirname(dir) === dir) throw new Error(`${pkg}/${file} not found: npm install (e2e devDependencies)`);
  }
}

const PAGE_SCRIPT = String.raw`
(() => {
  const params = new URLSearchParams(location.search);
  const kind = params.get('player');
  const src = params.get('src');
  const video = document.getElementById('v');
  const t0 = performance.now();
  const state = {
    player: kind, src, started: false, ended: false, stalls: 0, stalledEvents: 0,
    events: [], errors: [], warnings: [], loaded: [], hashing: 0,
  };
  const now = () => Math.round(performance.now() - t0);
  const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
  // timing: the loader's request and answer times (hls.js's stats), ms since the page started.
  const hashBody = (url, body, timing) => {
    if (!(body instanceof ArrayBuffer)) {
      state.errors.push('no ArrayBuffer body for ' + url + ': ' + Object.prototype.toString.call(body));
      return;
    }
    const copy = body.slice(0);
    const at = now();
    state.hashing++;
    crypto.subtle.digest('SHA-256', copy).then(
      (d) => state.loaded.push(Object.assign(
        { url: new URL(url, location.href).href, bytes: copy.byteLength, sha256: hex(d), at },
        timing || {},
      )),
      (e) => state.errors.push('digest ' + url + ': ' + e),
    ).finally(() => state.hashing--);
  };
  const event = (name) => video.addEventListener(name, () => {
    if (state.events.length < 500) state.events.push([name, Math.round(video.currentTime * 1000) / 1000, now()]);
  });
  ['loadedmetadata', 'canplay', 'playing', 'waiting', 'stalled', 'seeking', 'ended', 'pause'].forEach(event);
  // A wait between a seek (the page's, or the player's own jump over a gap at the start) and the
  // playing that ends it is seek latency, not a stall: Firefox may fire it after 'seeked'.
  let inSeek = false;
  video.addEventListener('seeking', () => { inSeek = true; });
  video.addEventListener('playing', () => { state.started = true; inSeek = false; });
  video.addEventListener('waiting', () => { if (state.started && !video.seeking && !inSeek && !video.ended) state.stalls++; });
  video.addEventListener('stalled', () => { state.stalledEvents++; });
  video.addEventListener('ended', () => { state.ended = true; });
  video.addEventListener('error', () => state.errors.push('video: ' + (video.error ? video.error.code + ' ' + video.error.message : '?')));

  if (kind === 'hls') {
    const Base = Hls.DefaultConfig.loader;
    class HashingLoader extends Base {
      load(context, config, callbacks) {
        const onSuccess = callbacks.onSuccess;
        const wrapped = Object.assign({}, callbacks, {
          onSuccess: (response, stats, ctx, details) => {
            hashBody(ctx.url, response.data, {
              startMs: Math.round((stats.loading.start - t0) * 10) / 10,
              endMs: Math.round((stats.loading.end - t0) * 10) / 10,
            });
            onSuccess(response, stats, ctx, details);
          },
        });
        super.load(context, config, wrapped);
      }
    }
    const hls = new Hls({ fLoader: HashingLoader });
    hls.on(Hls.Events.ERROR, (_e, d) => {
      (d.fatal ? state.errors : state.warnings).push('hls: ' + d.type + ' ' + d.details + (d.fatal ? ' (fatal)' : ''));
    });
    hls.loadSource(src);
    hls.attachMedia(video);
    window.__hls = hls;
  } else if (kind === 'dash') {
    const player = dashjs.MediaPlayer().create();
    const events = dashjs.MediaPlayer.events;
    player.on(events.FRAGMENT_LOADING_COMPLETED, (e) => {
      if (e.error || !e.response) state.warnings.push('dash: fragment failed ' + (e.request && e.request.url));
      else hashBody(e.request.url, e.response);
    });
    player.on(events.ERROR, (e) => state.errors.push('dash: ' + JSON.stringify(e.error)));
    player.initialize(video, src, true);
    window.__dash = player;
  } else {
    state.errors.push('unknown player ' + kind);
  }
  video.play().catch((e) => state.warnings.push('play(): ' + e));

  window.__player = {
    state: () => Object.assign({}, state, {
      currentTime: video.currentTime,
      duration: video.duration,
      readyState: video.readyState,
      paused: video.paused,
      ended: video.ended || state.ended,
    }),
  };
})();
`;

function playerHtml(lib: string): string {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>MUTP e2e player</title>
<script src="${lib}"></script>
</head><body>
<video id="v" muted playsinline autoplay width="640" height="360"></video>
<script>${PAGE_SCRIPT}</script>
</body></html>`;
}

export function startPlayerPages(): Promise<PlayerPages> {
  const files: Record<string, { body: string | Buffer; type: string }> = {
    '/lib/hls.min.js': { body: packageFile('hls.js', 'dist/hls.min.js'), type: 'text/javascript' },
    '/lib/dash.all.min.js': {
      body: packageFile('dashjs', 'dist/legacy/umd/dash.all.min.js'),
      type: 'text/javascript',
    },
    '/hls.html': { body: playerHtml('/lib/hls.min.js'), type: 'text/html; charset=utf-8' },
    '/dash.html': { body: playerHtml('/lib/dash.all.min.js'), type: 'text/html; charset=utf-8' },
    '/lib/shaka-player.compiled.js': {
      body: packageFile('shaka-player', 'dist/shaka-player.compiled.js'),
      type: 'text/javascript',
    },
    '/shaka.html': { body: rangePageHtml('shaka', '/lib/shaka-player.compiled.js'), type: 'text/html; charset=utf-8' },
    '/mse.html': { body: rangePageHtml('mse'), type: 'text/html; charset=utf-8' },
  };
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    const file = files[path];
    if (!file || req.method !== 'GET') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    res.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-store' }).end(file.body);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      const url = `http://127.0.0.1:${port}`;
      resolve({
        url,
        playerUrl: (player, manifestUrl, options = {}) => {
          const query = new URLSearchParams({ player, src: manifestUrl });
          for (const [k, v] of Object.entries(options)) query.set(k, String(v));
          return `${url}/${player}.html?${query.toString()}`;
        },
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
