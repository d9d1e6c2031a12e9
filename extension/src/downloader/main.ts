/**
 * Entry of the downloader frame (downloader.html, web-accessible, made invisible in the page by
 * the content script): one MutpClient for this page frame over the browser ClientHost and the
 * WebAssembly codecs. Requests come from the content script on port C (handed over in one window
 * message from the parent frame, with a one-time token); the port is used only once the
 * background confirms the token was granted by a content script of this tab, so a page that loads
 * downloader.html itself and posts it a port gets nothing. Answers go back with the bytes as a
 * transferred ArrayBuffer. Each download's record goes to the background for the popup.
 */
import { DEFAULT_ORIGO_BACKOFF, MutpClient } from '@mutp/shared/client';
import {
  DOWNLOADER_PORT,
  GetRequest,
  HookToDownloader,
  isObject,
  RedeemAnswer,
  SegmentRecord,
  ToBackground,
  TOKEN_PATTERN,
} from '../common/messages';
import { ext, loadSettings, onSettingsChanged } from '../common/ext';
import { redactUrl } from '../common/media';
import { normalizeSettings, origoUrlList, Settings } from '../common/settings';
import { LoadedCodecs, loadCodecs, WASM_DIR } from './codecs';
import { Downloader } from './downloader';
import { createBrowserHost } from './host';
import { loadSha256, Sha256 } from './sha256';
import { datagramBatchCounters } from './webtransport';

const api = ext();
let settings: Settings = normalizeSettings(undefined);
let session = '';
let codecs: Promise<LoadedCodecs> | undefined;
let loadedCodecs: LoadedCodecs | undefined;

const settingsReady = loadSettings()
  .then((s) => {
    settings = s;
  })
  .catch(() => undefined);

onSettingsChanged((state) => {
  settings = state.settings;
});

function getCodecs(): Promise<LoadedCodecs> {
  codecs ??= loadCodecs(api.runtime.getURL(WASM_DIR)).then((c) => {
    loadedCodecs = c;
    for (const problem of c.problems) console.warn(`[mutp] ${problem}`);
    return c;
  });
  return codecs;
}

/** Without it (WebAssembly refused), the core's portable SHA-256 serves, slower. */
let sha256: Promise<Sha256 | undefined> | undefined;

function report(record: SegmentRecord): void {
  const message: ToBackground = { type: 'segment', session, record };
  api.runtime.sendMessage(message).catch(() => undefined);
}

const downloader = new Downloader({
  settings: () => settings,
  createClient: async (s) => {
    const c = await getCodecs();
    sha256 ??= loadSha256().catch((e: unknown) => {
      console.warn(`[mutp] WebAssembly SHA-256 unavailable, using the portable one: ${String(e)}`);
      return undefined;
    });
    return new MutpClient(createBrowserHost(await sha256), {
      origoUrls: origoUrlList(s.origoUrl),
      codecs: c.codecs,
      maxObjectBytes: s.maxObjectBytes,
      transport: s.transport,
      // A failed origo attempt leaves origo alone 2 s, then 4 s, ... 60 s: segments go to the network at once meanwhile.
      origoBackoff: DEFAULT_ORIGO_BACKOFF,
      // origo's records get origin + path: query strings often carry signed tokens.
      recordUrl: redactUrl,
    });
  },
  modeAvailable: (mode) => mode === 'http' || mode === 'uncoded' || !loadedCodecs || loadedCodecs.available[mode],
  now: () => performance.now(),
  onRecord: report,
});

function attach(port: MessagePort): void {
  port.onmessage = (event: MessageEvent) => {
    const data: unknown = event.data;
    if (!isObject(data)) return;
    const m = data as unknown as HookToDownloader;
    if (m.type === 'hello') session = String(m.session).slice(0, 64);
    else if (m.type === 'cancel') downloader.cancel(Number(m.id));
    else if (m.type === 'get') serve(port, m);
  };
  settingsReady.then(() => {
    port.postMessage({ type: 'ready' });
    // The frame exists because the page has media: connect to origo before the first segment.
    downloader.prepare();
  });
  // Load the WebAssembly now: the first segment should not wait for it.
  getCodecs().catch(() => undefined);
}

function serve(port: MessagePort, req: GetRequest): void {
  downloader
    .handle(req)
    .then((answer) => {
      if (!answer) return;
      port.postMessage(answer, answer.ok ? [answer.body] : []);
    })
    .catch((e: unknown) => {
      port.postMessage({ type: 'result', id: req.id, ok: false, reason: 'internal', message: String(e).slice(0, 512) });
    });
}

/** Attaches `port` if the background vouches for `token` (granted by our tab's content script, unused). */
async function redeem(token: string, port: MessagePort): Promise<void> {
  const message: ToBackground = { type: 'downloader-redeem', token };
  const answer = (await api.runtime.sendMessage(message)) as RedeemAnswer | undefined;
  if (answer?.ok === true) attach(port);
  else port.close();
}

window.addEventListener('message', (event: MessageEvent) => {
  if (event.source !== window.parent) return;
  const data: unknown = event.data;
  const port = event.ports[0];
  if (!isObject(data) || !port) return;
  const token = data[DOWNLOADER_PORT];
  if (typeof token !== 'string' || !TOKEN_PATTERN.test(token)) return port.close();
  redeem(token, port).catch(() => port.close());
});

window.addEventListener('pagehide', () => downloader.close());

// For profiling through the DevTools protocol (e2e's profile:browser); the embedding page cannot reach it.
(globalThis as { __mutpFrameTimeline?: () => unknown }).__mutpFrameTimeline = () => ({
  downloads: downloader.timeline(),
  datagramBatches: { ...datagramBatchCounters },
});
