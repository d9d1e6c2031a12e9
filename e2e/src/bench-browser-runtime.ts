/**
 * The browsers bench:browser plays in (`--runtime chromium|firefox`): how a cell gets a browser
 * whose extension has the cell's settings, and what renders the plots.
 *
 * - Chromium: one browser for the whole run; each cell writes its settings into the extension's
 *   storage (they apply to the next page at once), and the extension's download records are read
 *   from storage.session.
 * - Firefox ESR: BiDi reaches neither the add-on's storage nor its pages, so settings can only be
 *   preset in the add-on's package (browser.ts, launchFirefox): each cell gets a Firefox of its
 *   own, installed with the cell's settings, which it waits for (firefox-sessions.ts) and closes
 *   at the cell's end. Its plays have no download records: the page's own timings are the
 *   segments (browser-play.ts, PageSegment). The plots are rendered by a plain Chromium.
 */
import type { Browser } from 'puppeteer-core';
import { ChromiumSession, ExtensionSettings, FirefoxSession, launchChromium, launchFirefox } from './browser';
import type { PlayBrowser } from './browser-play';
import { presetSettingsApplied } from './firefox-sessions';

export const RUNTIMES = ['chromium', 'firefox'] as const;
export type BenchRuntime = (typeof RUNTIMES)[number];

export interface CellBrowsers {
  runtime: BenchRuntime;
  /** A browser whose extension plays with `settings` (until endCell). */
  forCell(settings: ExtensionSettings): Promise<PlayBrowser>;
  endCell(): Promise<void>;
  /** A browser for the plots' screenshots. */
  renderer(): Promise<Browser>;
  close(): Promise<void>;
}

export interface CellBrowserOptions {
  /** Proxies on loopback (Chromium's loopback ICE flag) or on testbed hosts. */
  loopbackPeers: boolean;
  /** Chromium only: an unpacked extension other than the built one. */
  extensionDir?: string;
  /** The player pages' server: Firefox's preset is checked on a page of it without media. */
  pagesUrl: string;
}

export async function cellBrowsers(runtime: BenchRuntime, o: CellBrowserOptions): Promise<CellBrowsers> {
  if (runtime === 'chromium') {
    const chromium = await launchChromium({ loopbackPeers: o.loopbackPeers, extensionDir: o.extensionDir });
    return {
      runtime,
      async forCell(settings) {
        await chromium.setSettings(settings);
        return chromium;
      },
      endCell: async () => undefined,
      renderer: async () => chromium.browser,
      close: () => chromium.close(),
    };
  }
  if (o.extensionDir) throw new Error('--extension is a Chromium build: Firefox uses extension/dist/firefox');
  let firefox: FirefoxSession | undefined;
  let plain: ChromiumSession | undefined;
  const endCell = async () => {
    await firefox?.close();
    firefox = undefined;
  };
  return {
    runtime,
    async forCell(settings) {
      await endCell();
      const session = await launchFirefox(settings);
      firefox = session;
      // The background applies the preset a moment after the install: a page before it plays with the defaults.
      await presetSettingsApplied(session, `${o.pagesUrl}/no-media`);
      return { browser: session.browser };
    },
    endCell,
    async renderer() {
      plain ??= await launchChromium({ extension: false, loopbackPeers: o.loopbackPeers });
      return plain.browser;
    },
    async close() {
      await endCell();
      await plain?.close();
    },
  };
}
