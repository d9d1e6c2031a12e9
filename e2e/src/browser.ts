/**
 * Real browsers with the built MUTP extension, for the playback tests and bench:browser:
 * Debian's Chromium (puppeteer-core, new headless mode, the extension loaded unpacked, options set
 * through its service worker, per-tab statistics read from storage.session) and Firefox ESR
 * (WebDriver BiDi, the extension installed as a temporary add-on with its options preset in a
 * copied package). See shared notes/environment.md and extension/README.md ("For tests").
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { Browser, Page, WebWorker } from 'puppeteer-core';
import type { Counters } from '@mutp/extension/counters';
import type { SegmentRecord } from '@mutp/extension/messages';
import type { Settings } from '@mutp/extension/settings';
import type { TabStats } from '@mutp/extension/stats';
import { CHROMIUM_PATH, CHROMIUM_PLAYER_ARGS, FIREFOX_PATH, FIREFOX_PREFS } from '@mutp/testing/browsers';
import { waitFor } from '@mutp/testing/wait';

export { waitFor };

export type { Counters, SegmentRecord, TabStats };

const ROOT = join(__dirname, '..', '..');
export const EXTENSION_DIR = join(ROOT, 'extension');
export const CHROME_EXTENSION = join(EXTENSION_DIR, 'dist', 'chrome');
export const FIREFOX_EXTENSION = join(EXTENSION_DIR, 'dist', 'firefox');
export { CHROMIUM_PATH, FIREFOX_PATH, FIREFOX_PREFS };

/** Chromium for player runs: the extension tests' flags plus full speed for pages not in front. */
export const CHROMIUM_ARGS = CHROMIUM_PLAYER_ARGS;

/** The extension options (extension/src/common/settings.ts); partial objects are completed there. */
export type ExtensionSettings = Partial<Settings>;

/** The parts of the extension API the tests call inside the service worker. */
interface ChromeApi {
  storage: {
    local: { set(items: Record<string, unknown>): Promise<void>; get(key: string): Promise<Record<string, unknown>> };
    session: { get(key: string | null): Promise<Record<string, unknown>>; clear(): Promise<void> };
  };
  tabs: { query(q: object): Promise<{ id?: number; url?: string }[]> };
}

/** dist/ is older than any input of the extension build. */
function newestMtime(path: string): number {
  if (!existsSync(path)) return 0;
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let newest = 0;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)));
  return newest;
}

/** Builds the extension (production, `npm run build -w extension`) when dist/ is missing or stale. */
export function ensureExtensionBuilt(): void {
  // A stamp written after each build here: the copied manifest.json keeps its source's mtime, so
  // it never looked newer than the sources and every run rebuilt.
  const stamp = join(EXTENSION_DIR, 'dist', '.e2e-built');
  // The build's last step writes the two packages (extension/webpack.config.mjs): one newer than
  // every input is a finished build too, e.g. scripts/setup.sh's (else CI's first browser suite
  // built the extension a second time).
  const packages = ['chrome', 'firefox'].map((b) => join(EXTENSION_DIR, 'dist', `mutp-${b}.zip`));
  const manifests = ['chrome', 'firefox'].map((b) => join(EXTENSION_DIR, 'dist', b, 'manifest.json'));
  const inputs = [
    ...['src', 'static', 'webpack.config.mjs', 'package.json'].map((p) => join(EXTENSION_DIR, p)),
    ...['shared/src', 'wasm/src', 'wasm/dist'].map((p) => join(ROOT, p)),
  ];
  const newestInput = Math.max(...inputs.map(newestMtime));
  const builtAfterInputs = (files: string[]) => files.every((f) => existsSync(f) && statSync(f).mtimeMs >= newestInput);
  if (manifests.every((m) => existsSync(m)) && (builtAfterInputs([stamp]) || builtAfterInputs(packages))) return;
  execFileSync('npm', ['run', 'build', '-w', 'extension'], { cwd: ROOT, stdio: 'pipe', timeout: 300_000 });
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
}

export function requireBrowser(path: string, apt: string): void {
  if (!existsSync(path)) throw new Error(`${path} not found: apt-get install -y ${apt} (scripts/setup.sh)`);
}

export interface ChromiumSession {
  browser: Browser;
  /** Undefined when launched without the extension. */
  extensionId?: string;
  /** Replaces the extension's stored settings (applies to open pages at once). */
  setSettings(settings: ExtensionSettings): Promise<void>;
  /** The background's statistics of the tab showing `pageUrl`. */
  tabStats(pageUrl: string): Promise<TabStats | undefined>;
  close(): Promise<void>;
}

async function serviceWorker(browser: Browser): Promise<{ worker: WebWorker; extensionId: string }> {
  const target = await browser.waitForTarget(
    (t) =>
      t.type() === 'service_worker' && t.url().startsWith('chrome-extension://') && t.url().endsWith('/background.js'),
    { timeout: 20_000 },
  );
  const worker = await target.worker();
  if (!worker) throw new Error('the extension service worker has no worker handle');
  return { worker, extensionId: new URL(target.url()).host };
}

/** Chromium with (default) or without the built extension, in a fresh profile. */
export async function launchChromium(
  options: {
    extension?: boolean;
    args?: string[];
    /** proxies on loopback (default) or on other hosts */ loopbackPeers?: boolean;
    /** An unpacked extension other than the built one (A/B runs of two builds). */
    extensionDir?: string;
  } = {},
): Promise<ChromiumSession> {
  requireBrowser(CHROMIUM_PATH, 'chromium');
  const withExtension = options.extension ?? true;
  const userDataDir = mkdtempSync(join(tmpdir(), 'mutp-e2e-chromium-'));
  const base =
    options.loopbackPeers === false
      ? CHROMIUM_ARGS.filter((a) => a !== '--allow-loopback-in-peer-connection')
      : CHROMIUM_ARGS;
  const args = [...base, ...(options.args ?? [])];
  const extensionDir = options.extensionDir ?? CHROME_EXTENSION;
  if (withExtension) args.push(`--disable-extensions-except=${extensionDir}`, `--load-extension=${extensionDir}`);
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    userDataDir,
    protocolTimeout: 60_000,
    enableExtensions: withExtension,
    args,
  });
  let worker: WebWorker | undefined;
  let extensionId: string | undefined;
  try {
    if (withExtension) ({ worker, extensionId } = await serviceWorker(browser));
  } catch (e) {
    await browser.close().catch(() => undefined);
    rmSync(userDataDir, { recursive: true, force: true });
    throw e;
  }
  const chrome = () => {
    if (!worker) throw new Error('Chromium was launched without the extension');
    return worker;
  };
  return {
    browser,
    extensionId,
    async setSettings(settings) {
      await chrome().evaluate(
        (s) => (globalThis as unknown as { chrome: ChromeApi }).chrome.storage.local.set({ settings: s }),
        settings as Record<string, unknown>,
      );
    },
    async tabStats(pageUrl) {
      return (await chrome().evaluate(async (url) => {
        const api = (globalThis as unknown as { chrome: ChromeApi }).chrome;
        // The extension has no host permissions, so tab URLs are hidden: find the tab by its statistics.
        return Object.values(await api.storage.session.get(null)).find((t) => (t as TabStats)?.pageUrl === url);
      }, pageUrl)) as TabStats | undefined;
    },
    async close() {
      await browser.close().catch(() => undefined);
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

export interface FirefoxSession {
  browser: Browser;
  close(): Promise<void>;
}

/**
 * Firefox ESR with the extension installed as a temporary add-on; its options come from
 * `preset-settings.json` in a copy of dist/firefox (BiDi cannot reach moz-extension:// pages).
 */
export async function launchFirefox(settings: ExtensionSettings): Promise<FirefoxSession> {
  requireBrowser(FIREFOX_PATH, 'firefox-esr');
  const addonDir = mkdtempSync(join(tmpdir(), 'mutp-e2e-addon-'));
  cpSync(FIREFOX_EXTENSION, addonDir, { recursive: true });
  writeFileSync(join(addonDir, 'preset-settings.json'), JSON.stringify(settings));
  let browser: Browser | undefined;
  try {
    browser = await puppeteer.launch({
      browser: 'firefox',
      executablePath: FIREFOX_PATH,
      headless: true,
      protocolTimeout: 60_000,
      extraPrefsFirefox: FIREFOX_PREFS,
    });
    await browser.installExtension(addonDir);
  } catch (e) {
    await browser?.close().catch(() => undefined);
    rmSync(addonDir, { recursive: true, force: true });
    throw e;
  }
  const b = browser;
  return {
    browser: b,
    async close() {
      await b.close().catch(() => undefined);
      rmSync(addonDir, { recursive: true, force: true });
    },
  };
}

/** What the player page reports (e2e/src/player-pages.ts). */
export interface PlayerState {
  player: string;
  src: string;
  currentTime: number;
  duration: number;
  readyState: number;
  paused: boolean;
  ended: boolean;
  started: boolean;
  /** `waiting` events after playback first started (rebuffering), and `stalled` events. */
  stalls: number;
  stalledEvents: number;
  events: [string, number, number][];
  errors: string[];
  warnings: string[];
  /**
   * Every media object the player's loader got, hashed in the page; hls.js's with the loader's
   * request (`startMs`) and answer (`endMs`) times, ms since the page started.
   */
  loaded: { url: string; bytes: number; sha256: string; at: number; startMs?: number; endMs?: number }[];
  hashing: number;
}

type PageWindow = {
  __player?: { state(): PlayerState };
  __mutp?: { counters(): Counters; config(): Record<string, unknown> };
};

export async function playerState(page: Page): Promise<PlayerState> {
  return page.evaluate(() => {
    const w = globalThis as unknown as PageWindow;
    if (!w.__player) throw new Error('the player page did not set window.__player');
    return w.__player.state();
  });
}

/** The hook's counters in the page (needs `exposeCounters: true`); undefined before settings arrived. */
export async function pageCounters(page: Page): Promise<Counters | undefined> {
  return page.evaluate(() => (globalThis as unknown as PageWindow).__mutp?.counters());
}

export async function hookConfig(page: Page): Promise<Record<string, unknown> | undefined> {
  return page.evaluate(() => (globalThis as unknown as PageWindow).__mutp?.config());
}

export function totalFallbacks(c: Counters): number {
  return Object.values(c.fallbacks).reduce((a, b) => a + b, 0);
}
