/** Loads wasm/dist/mutp-wirehair.wasm in Node (built by wasm/wirehair/build.sh via scripts/setup.sh). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadWirehair, loadWirehairSync, Wirehair, WirehairError } from './wirehair';

export const WIREHAIR_WASM_PATH = join(__dirname, '..', 'dist', 'mutp-wirehair.wasm');

/** The module's bytes; WirehairError 'module' with the fix when the file is missing. */
export function readWirehairWasm(path: string = WIREHAIR_WASM_PATH): Uint8Array {
  try {
    return readFileSync(path);
  } catch (e) {
    if ((e as { code?: unknown }).code === 'ENOENT') {
      throw new WirehairError(
        'module',
        `${path} is missing: run \`bash scripts/setup.sh\` (builds the WebAssembly modules)`,
      );
    }
    throw e;
  }
}

export function loadWirehairNode(path?: string): Promise<Wirehair> {
  return loadWirehair(readWirehairWasm(path));
}

export function loadWirehairNodeSync(path?: string): Wirehair {
  return loadWirehairSync(readWirehairWasm(path));
}
