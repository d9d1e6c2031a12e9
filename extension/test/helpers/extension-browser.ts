/**
 * Headless Chromium with the built extension (dist/chrome, or `dir`) loaded, and its background
 * service worker: the handle tests use to set storage and find the extension's pages.
 */
import type { WebWorker } from 'puppeteer-core';
import { launchChromium, LaunchedBrowser } from '@mutp/testing/browsers';
import { ensureBuilt } from './build';

export interface ExtensionBrowser {
  browser: LaunchedBrowser;
  worker: WebWorker;
  extensionId: string;
}

export async function launchWithExtension(dir = ensureBuilt()): Promise<ExtensionBrowser> {
  const browser = await launchChromium({
    enableExtensions: true,
    args: [`--disable-extensions-except=${dir}`, `--load-extension=${dir}`],
  });
  try {
    const target = await browser.browser.waitForTarget(
      (t) => t.type() === 'service_worker' && t.url().endsWith('/background.js'),
      { timeout: 20_000 },
    );
    return { browser, worker: (await target.worker())!, extensionId: new URL(target.url()).host };
  } catch (e) {
    await browser.close();
    throw e;
  }
}
