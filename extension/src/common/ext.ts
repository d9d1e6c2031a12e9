/**
 * The WebExtension API object: `browser` (Firefox, promise-based) when present, else `chrome`
 * (Chromium MV3, whose APIs return promises too).
 */
import { normalizeSettings, Settings, SETTINGS_KEY } from './settings';

export function ext(): typeof chrome {
  const g = globalThis as { browser?: typeof chrome; chrome?: typeof chrome };
  const api = g.browser ?? g.chrome;
  if (!api) throw new Error('no extension API here');
  return api;
}

/** The settings in storage.local, with defaults for whatever is missing. */
export async function loadSettings(): Promise<Settings> {
  const got = (await ext().storage.local.get(SETTINGS_KEY)) as Record<string, unknown>;
  return normalizeSettings(got[SETTINGS_KEY]);
}

/** Merges `patch` into the stored settings. */
export async function saveSettings(patch: Partial<Settings>): Promise<Settings> {
  const next = normalizeSettings({ ...(await loadSettings()), ...patch });
  await ext().storage.local.set({ [SETTINGS_KEY]: next });
  return next;
}
