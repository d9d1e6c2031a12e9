import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { NetworkProfile, profileByName } from '@mutp/sim/profiles';

/**
 * A profile by name, `trace:<file>` read from disk (linkem gets the absolute path). `loopback`
 * has no profile: the caller runs without the testbed.
 */
export function loadProfile(name: string): NetworkProfile {
  if (name.startsWith('trace:')) {
    const file = name.slice('trace:'.length);
    const absolute = isAbsolute(file) ? file : resolve(file);
    return profileByName(`trace:${absolute}`, (path) => readFileSync(path, 'utf8'));
  }
  return profileByName(name);
}
