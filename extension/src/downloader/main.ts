/**
 * Entry of the downloader frame (downloader.html, web-accessible, made invisible in the page by
 * the content script): one MutpClient for this page frame over the browser ClientHost and the
 * WebAssembly codecs. Requests come from the page hook on port B (handed over by the content
 * script in one window message from the parent frame); answers go back on it with the bytes as a
 * transferred ArrayBuffer. Each download's record goes to the background for the popup.
 */
import { MutpClient } from '@mutp/shared';
import {
  DOWNLOADER_PORT,
  GetRequest,
  HookToDownloader,
  isObject,
  SegmentRecord,
  ToBackground,
} from '../common/messages';
import { ext, loadSettings } from '../common/ext';
import { normalizeSettings, Settings, SETTINGS_KEY } from '../common/settings';
import { LoadedCodecs, loadCodecs, WASM_DIR } from './codecs';
import { Downloader } from './downloader';
import { createBrowserHost } from './host';

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

api.storage.onChanged.addListener((changes, area) => {
  if (area === 'local' && changes[SETTINGS_KEY]) settings = normalizeSettings(changes[SETTINGS_KEY].newValue);
});

function getCodecs(): Promise<LoadedCodecs> {
  codecs ??= loadCodecs(api.runtime.getURL(WASM_DIR)).then((c) => {
    loadedCodecs = c;
    for (const problem of c.problems) console.warn(`[mutp] ${problem}`);
    return c;
  });
  return codecs;
}

function report(record: SegmentRecord): void {
  const message: ToBackground = { type: 'segment', session, record };
  api.runtime.sendMessage(message).catch(() => undefined);
}

const downloader = new Downloader({
  settings: () => settings,
  createClient: async (s) => {
    const c = await getCodecs();
    return new MutpClient(createBrowserHost(), {
      origoUrl: s.origoUrl,
      codecs: c.codecs,
      maxObjectBytes: s.maxObjectBytes,
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
  settingsReady.then(() => port.postMessage({ type: 'ready' }));
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

window.addEventListener('message', (event: MessageEvent) => {
  if (event.source !== window.parent) return;
  const data: unknown = event.data;
  if (!isObject(data) || typeof data[DOWNLOADER_PORT] !== 'string' || !event.ports[0]) return;
  attach(event.ports[0]);
});

window.addEventListener('pagehide', () => downloader.close());
