/**
 * hls.js and dash.js play through the hook's emulated XHRs (headless Chromium): a short stream made
 * here with ffmpeg, the hook installed with the real Downloader behind a fake MutpClient whose
 * bytes come from the test server (harness `?source=network`). Every segment the players load
 * must be served by the hook, none may fall back, and playback must advance.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchChromium, LaunchedBrowser } from '@mutp/testing/browsers';
import { buildHarness } from './helpers/harness';
import { startTestServer, TestServer } from './helpers/server';
import type { Counters } from '../src/common/counters';
import { workerNotice } from '../src/common/explain';

jest.setTimeout(120_000);

let browser: LaunchedBrowser;
let server: TestServer;
let mediaDir: string;

const FFMPEG_INPUT = [
  ...['-f', 'lavfi', '-i', 'testsrc2=size=320x180:rate=25'],
  ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=44100'],
  ...['-t', '8', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p'],
  ...['-g', '50', '-keyint_min', '50', '-sc_threshold', '0', '-c:a', 'aac', '-b:a', '64k'],
];

function ffmpeg(args: string[], cwd: string): void {
  execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...FFMPEG_INPUT, ...args], {
    cwd,
    stdio: 'pipe',
    timeout: 60_000,
  });
}

const PLAYER_PAGE = (script: string, setup: string) => `<!doctype html><html><head>
<script src="/harness.js"></script>
<script src="${script}"></script>
</head><body><video id="v" muted playsinline width="320" height="180"></video><script>
  window.__errors = [];
  const video = document.getElementById('v');
  ${setup}
  video.play().catch((e) => window.__errors.push('play: ' + e));
</script></body></html>`;

beforeAll(async () => {
  mediaDir = mkdtempSync(join(tmpdir(), 'mutp-ext-media-'));
  const hls = join(mediaDir, 'hls');
  const dash = join(mediaDir, 'dash');
  mkdirSync(hls);
  mkdirSync(dash);
  ffmpeg(
    [
      ...['-f', 'hls', '-hls_time', '2', '-hls_playlist_type', 'vod', '-hls_segment_type', 'fmp4'],
      ...['-hls_fmp4_init_filename', 'init.mp4', '-hls_segment_filename', 'seg-%d.m4s', 'index.m3u8'],
    ],
    hls,
  );
  ffmpeg(['-f', 'dash', '-seg_duration', '2', '-use_template', '1', '-use_timeline', '0', 'stream.mpd'], dash);
  const root = join(__dirname, '..', '..', 'node_modules');
  server = await startTestServer(
    {
      '/harness.js': { body: await buildHarness(), type: 'text/javascript' },
      '/hls.js': { body: readFileSync(join(root, 'hls.js', 'dist', 'hls.min.js')), type: 'text/javascript' },
      '/dash.js': {
        body: readFileSync(join(root, 'dashjs', 'dist', 'legacy', 'umd', 'dash.all.min.js')),
        type: 'text/javascript',
      },
      '/hls.html': {
        body: PLAYER_PAGE(
          '/hls.js',
          // hls.js's default: it transmuxes in a worker (which must raise no worker notice, issue 32).
          `const hls = new Hls({ enableWorker: true });
           hls.on(Hls.Events.ERROR, (_e, d) => { if (d.fatal) window.__errors.push('hls: ' + d.details); });
           hls.loadSource('/static/hls/index.m3u8');
           hls.attachMedia(video);`,
        ),
        type: 'text/html',
      },
      '/dash.html': {
        body: PLAYER_PAGE(
          '/dash.js',
          `const player = dashjs.MediaPlayer().create();
           player.on(dashjs.MediaPlayer.events.ERROR, (e) => window.__errors.push('dash: ' + JSON.stringify(e.error)));
           player.initialize(video, '/static/dash/stream.mpd', true);`,
        ),
        type: 'text/html',
      },
    },
    mediaDir,
  );
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
  if (mediaDir) rmSync(mediaDir, { recursive: true, force: true });
});

async function play(pagePath: string, segmentFiles: string[], expectWorkers: boolean) {
  const page = await browser.browser.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  try {
    await page.goto(`${server.url}${pagePath}?source=network`, { waitUntil: 'load' });
    await page
      .waitForFunction(
        () => {
          const v = document.getElementById('v') as HTMLVideoElement;
          return v.currentTime >= 3 || (window as unknown as { __errors: string[] }).__errors.length > 0;
        },
        { timeout: 45_000, polling: 200 },
      )
      .catch(() => undefined);
    const state = await page.evaluate(() => ({
      currentTime: (document.getElementById('v') as HTMLVideoElement).currentTime,
      errors: (window as unknown as { __errors: string[] }).__errors,
      counters: (window as unknown as { __harness: { counters(): Counters } }).__harness.counters(),
    }));
    expect({ errors: state.errors, pageErrors }).toEqual({ errors: [], pageErrors: [] });
    expect(state.currentTime).toBeGreaterThanOrEqual(3);
    const c = state.counters;
    expect(c.manifests).toBeGreaterThanOrEqual(1);
    expect(c.fallbacks).toEqual({});
    expect(c.served).toBeGreaterThanOrEqual(3); // init + at least two media segments
    expect(c.served + c.aborted).toBe(c.intercepted);
    // The segments the player fetched went through the hook, not straight to the network by XHR:
    // the server saw each one from the fake downloader's fetch only (same count as served).
    const segmentRequests = server.log.filter((l) => segmentFiles.some((f) => l.includes(f)));
    expect(segmentRequests.length).toBe(c.served);
    // What reached the player through MSE came from those requests: no worker notice, whatever
    // workers the player runs (hls.js transmuxes in one, issue 32).
    expect(c.appendedBytes).toBeGreaterThan(0);
    expect({ workers: c.workers > 0, notice: workerNotice(c) }).toEqual({ workers: expectWorkers, notice: undefined });
  } finally {
    await page.close();
  }
}

test('hls.js (fMP4) plays with every segment served by the hook', async () => {
  const files = readdirSync(join(mediaDir, 'hls')).filter((f) => f.endsWith('.m4s') || f === 'init.mp4');
  await play(
    '/hls.html',
    files.map((f) => `/static/hls/${f}`),
    true,
  );
});

test('dash.js plays with every segment served by the hook', async () => {
  const files = readdirSync(join(mediaDir, 'dash')).filter((f) => f.endsWith('.m4s'));
  await play(
    '/dash.html',
    files.map((f) => `/static/dash/${f}`),
    false,
  );
});
