/**
 * Firefox ESR for comparisons against the extension (browser.ts's launchFirefox always installs
 * it): the same binary and preferences without the add-on, and a bounded wait until the add-on's
 * preset settings reached the page hook (the background applies them on install, a moment after
 * installExtension returns; a page opened before would play with the defaults).
 */
import puppeteer from 'puppeteer-core';
import { FIREFOX_PATH, FIREFOX_PREFS, FirefoxSession, pageCounters, requireBrowser, waitFor } from './browser';

/** Firefox ESR in a fresh temporary profile (puppeteer removes it on close), no add-on. */
export async function launchFirefoxWithoutExtension(): Promise<FirefoxSession> {
  requireBrowser(FIREFOX_PATH, 'firefox-esr');
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX_PATH,
    headless: true,
    protocolTimeout: 60_000,
    extraPrefsFirefox: FIREFOX_PREFS,
  });
  return {
    browser,
    async close() {
      await browser.close().catch(() => undefined);
    },
  };
}

/**
 * Waits until a page at `probeUrl` (one that makes no media request) sees the hook's counters,
 * which it only exposes once settings with `exposeCounters: true` arrived: the preset is in force.
 */
export async function presetSettingsApplied(session: FirefoxSession, probeUrl: string): Promise<void> {
  const page = await session.browser.newPage();
  try {
    await waitFor(
      `the add-on's preset settings (exposeCounters) to reach the page hook at ${probeUrl}`,
      async () => {
        await page.goto(probeUrl, { waitUntil: 'load' });
        return (await pageCounters(page)) ? true : undefined;
      },
      20_000,
      250,
    );
  } finally {
    await page.close();
  }
}
