/**
 * The browsers the tests and benchmarks drive, and how (see the team's notes/environment.md):
 * Debian's full Chromium (chromium-headless-shell cannot load extensions) in new headless mode
 * with a fresh profile, and Firefox ESR. One list of flags for the extension tests, the
 * end-to-end player runs and the codec benchmark.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { Browser, LaunchOptions } from 'puppeteer-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/lib/chromium/chromium';

/** A quiet, reproducible Chromium: no sandbox (root in CI), no GPU, no background traffic. */
export const CHROMIUM_BASE_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-dev-shm-usage',
];

/** For pages that play media and reach proxies over WebRTC. */
export const CHROMIUM_ARGS = [
  ...CHROMIUM_BASE_ARGS,
  '--autoplay-policy=no-user-gesture-required',
  // WebRTC towards local proxies: real host candidates (libdatachannel cannot resolve mDNS names).
  '--disable-features=WebRtcHideLocalIpsWithMdns',
  '--allow-loopback-in-peer-connection',
];

/** CHROMIUM_ARGS plus full speed for pages that are not in front (players in background tabs). */
export const CHROMIUM_PLAYER_ARGS = [
  ...CHROMIUM_ARGS,
  '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows',
];

export const FIREFOX_PATH = process.env.FIREFOX_PATH ?? '/usr/lib/firefox-esr/firefox-esr';

/** Firefox preferences: muted autoplay, host ICE candidates without mDNS obfuscation, loopback. */
export const FIREFOX_PREFS: Record<string, unknown> = {
  'media.autoplay.default': 0,
  'media.autoplay.blocking_policy': 0,
  'media.peerconnection.ice.obfuscate_host_addresses': false,
  'media.peerconnection.ice.loopback': true,
  'media.peerconnection.ice.default_address_only': false,
  'media.peerconnection.ice.no_host': false,
  'dom.min_background_timeout_value': 4,
  'app.update.enabled': false,
  'browser.shell.checkDefaultBrowser': false,
};

export function requireChromium(): void {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM_PATH}: apt-get install chromium (scripts/setup.sh), or set CHROMIUM_PATH`,
    );
  }
}

export interface LaunchedBrowser {
  browser: Browser;
  close(): Promise<void>;
}

export async function launchChromium(extra: LaunchOptions = {}): Promise<LaunchedBrowser> {
  requireChromium();
  const userDataDir = mkdtempSync(join(tmpdir(), 'mutp-ext-test-'));
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    userDataDir,
    protocolTimeout: 30_000,
    ...extra,
    args: [...CHROMIUM_ARGS, ...(extra.args ?? [])],
  });
  return {
    browser,
    close: async () => {
      await browser.close().catch(() => undefined);
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
