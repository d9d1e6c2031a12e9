/**
 * The WebExtension API object: `browser` (Firefox, promise-based) when present, else `chrome`
 * (Chromium MV3, whose APIs return promises too).
 */
import { mergeSettings, normalizeSettings, Settings, SETTINGS_KEY, SettingsState } from './settings';

export function ext(): typeof chrome {
  const g = globalThis as { browser?: typeof chrome; chrome?: typeof chrome };
  const api = g.browser ?? g.chrome;
  if (!api) throw new Error('no extension API here');
  return api;
}

/**
 * The operator's settings as the background last read them from `storage.managed` (Chrome's
 * policy for the extension, Firefox's `3rdparty` enterprise policy or managed-storage manifest),
 * mirrored into storage.local under this key. Pages and content scripts read the mirror, not
 * storage.managed: in Chromium a `storage.managed.get` made early can stay unanswered for good,
 * and the settings must never wait on it.
 */
export const MANAGED_MIRROR_KEY = 'managedSettings';

/** storage.managed now; undefined when it did not answer within `timeoutMs` (or failed). Firefox rejects when no policy exists: {}. */
export async function readManaged(timeoutMs: number): Promise<Record<string, unknown> | undefined> {
  const managed = ext().storage.managed;
  if (!managed) return {};
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs)));
  try {
    const got = managed.get(null).then(
      (v) => (v as Record<string, unknown> | undefined) ?? {},
      () => ({}),
    );
    return await Promise.race([got, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The settings in effect, which of them the operator locked, and where the origo URL comes from. */
export async function loadSettingsState(): Promise<SettingsState> {
  const got = (await ext().storage.local.get([SETTINGS_KEY, MANAGED_MIRROR_KEY])) as Record<string, unknown>;
  return mergeSettings(got[SETTINGS_KEY], got[MANAGED_MIRROR_KEY]);
}

/** The settings in effect (the user's, the operator's over them), with defaults for whatever is missing. */
export async function loadSettings(): Promise<Settings> {
  return (await loadSettingsState()).settings;
}

async function readLocal(): Promise<unknown> {
  const got = (await ext().storage.local.get(SETTINGS_KEY)) as Record<string, unknown>;
  return got[SETTINGS_KEY];
}

/** Merges `patch` into the user's stored settings (managed values are never copied into them). */
export async function saveSettings(patch: Partial<Settings>): Promise<Settings> {
  const next = normalizeSettings({ ...normalizeSettings(await readLocal()), ...patch });
  await ext().storage.local.set({ [SETTINGS_KEY]: next });
  return next;
}

/** Calls `listener` with the new state whenever the user's or the operator's settings change. */
export function onSettingsChanged(listener: (state: SettingsState) => void): void {
  ext().storage.onChanged.addListener((changes, area) => {
    if (area === 'local' && (changes[SETTINGS_KEY] || changes[MANAGED_MIRROR_KEY])) {
      loadSettingsState()
        .then(listener)
        .catch(() => undefined);
    }
  });
}
