/**
 * Launching Debian's Chromium for the browser tests (see shared notes/environment.md): the full
 * binary (chromium-headless-shell cannot load extensions), new headless mode, a fresh profile.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { Browser, LaunchOptions } from 'puppeteer-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/lib/chromium/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-dev-shm-usage',
  '--autoplay-policy=no-user-gesture-required',
  // WebRTC towards local proxies: real host candidates (libdatachannel cannot resolve mDNS names).
  '--disable-features=WebRtcHideLocalIpsWithMdns',
  '--allow-loopback-in-peer-connection',
];

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
