/**
 * Managed settings (an operator's policy, storage.managed) over the user's: what overrides, what
 * is locked, where the origo URL comes from; and the schema Chrome validates policies against
 * (static/managed-schema.json) names every setting with the bounds normalizeSettings applies.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  DEFAULT_SETTINGS,
  DOWNLOAD_MODES,
  mergeSettings,
  normalizeSettings,
  SETTING_KEYS,
  TRANSPORTS,
} from '../src/common/settings';

const schema = JSON.parse(readFileSync(join(__dirname, '..', 'static', 'managed-schema.json'), 'utf8')) as {
  type: string;
  properties: Record<string, { type: string; enum?: string[]; minimum?: number; maximum?: number }>;
};

describe('mergeSettings', () => {
  test('a fresh install has the local default origo, unconfigured, nothing locked', () => {
    expect(mergeSettings(undefined, {})).toEqual({
      settings: normalizeSettings(undefined),
      locked: [],
      origoSource: 'default',
    });
    // Saving the default as it is does not make it a deployment's origo.
    expect(mergeSettings({ origoUrl: DEFAULT_SETTINGS.origoUrl }, undefined).origoSource).toBe('default');
  });

  test('the user’s origo URL is the user’s', () => {
    const s = mergeSettings({ origoUrl: 'wss://origo.example/v1/client', proxies: 3 }, {});
    expect(s).toMatchObject({ origoSource: 'user', locked: [] });
    expect(s.settings).toMatchObject({ origoUrl: 'wss://origo.example/v1/client', proxies: 3 });
  });

  test('managed values override the user’s and lock those keys only', () => {
    const s = mergeSettings(
      { origoUrl: 'wss://mine.example/v1/client', mode: 'http', proxies: 3, staging: false },
      { origoUrl: 'wss://fleet.example/v1/client', mode: 'fountain', enabled: true },
    );
    expect(s.locked.sort()).toEqual(['enabled', 'mode', 'origoUrl']);
    expect(s.origoSource).toBe('managed');
    expect(s.settings).toMatchObject({
      origoUrl: 'wss://fleet.example/v1/client',
      mode: 'fountain',
      enabled: true,
      proxies: 3,
      staging: false,
    });
  });

  test('a managed value that is not valid locks nothing and changes nothing', () => {
    const s = mergeSettings(
      { mode: 'uncoded', origoUrl: 'wss://mine.example/v1/client' },
      { mode: 'quantum', origoUrl: 'not a url', proxies: 'many', staging: 'yes', unknownKey: 1 },
    );
    expect(s.locked).toEqual([]);
    expect(s.settings).toMatchObject({ mode: 'uncoded', origoUrl: 'wss://mine.example/v1/client', proxies: 4 });
  });

  test('managed numbers are clamped like the user’s, and still locked', () => {
    const s = mergeSettings({}, { proxies: 99, deadlineMs: 100 });
    expect(s.locked.sort()).toEqual(['deadlineMs', 'proxies']);
    expect(s.settings).toMatchObject({ proxies: 32, deadlineMs: 500 });
  });
});

describe('static/managed-schema.json', () => {
  test('names every setting, and nothing else', () => {
    expect(schema.type).toBe('object');
    expect(Object.keys(schema.properties).sort()).toEqual([...SETTING_KEYS].sort());
  });

  test('types and enums match the settings', () => {
    for (const key of SETTING_KEYS) {
      const value = DEFAULT_SETTINGS[key];
      const expected = Array.isArray(value) ? 'array' : typeof value === 'number' ? 'integer' : typeof value;
      expect({ key, type: schema.properties[key].type }).toEqual({ key, type: expected });
    }
    expect(schema.properties.mode.enum?.sort()).toEqual([...DOWNLOAD_MODES].sort());
    expect(schema.properties.transport.enum?.sort()).toEqual([...TRANSPORTS].sort());
  });

  test('the bounds are those normalizeSettings clamps to', () => {
    for (const [key, p] of Object.entries(schema.properties)) {
      if (p.type !== 'integer') continue;
      const low = normalizeSettings({ [key]: -1e12 }) as unknown as Record<string, number>;
      const high = normalizeSettings({ [key]: 1e12 }) as unknown as Record<string, number>;
      expect({ key, min: p.minimum, max: p.maximum }).toEqual({ key, min: low[key], max: high[key] });
    }
  });
});
