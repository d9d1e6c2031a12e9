/** Loads wasm/dist/mutp-rlnc-{simd,scalar}.wasm in Node (built by wasm/rlnc/build.sh via scripts/setup.sh). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadRlncModule, loadRlncModuleSync, RLNC_WASM_FILES, RlncModule, RlncWasmError, WasmRlncCodec } from './rlnc';
import { simdSupported } from './simd';

export interface RlncNodeOptions {
  /** SIMD128 module (true), scalar module (false); default: SIMD when the engine supports it. */
  simd?: boolean;
  /** Directory of the .wasm files; default wasm/dist. */
  dir?: string;
}

export const RLNC_WASM_DIR = join(__dirname, '..', 'dist');

/** Path of the module to load for these options. */
export function rlncWasmPath(options: RlncNodeOptions = {}): string {
  const simd = options.simd ?? simdSupported();
  return join(options.dir ?? RLNC_WASM_DIR, simd ? RLNC_WASM_FILES.simd : RLNC_WASM_FILES.scalar);
}

/** The module's bytes; RlncWasmError 'module' with the fix when the file is missing. */
export function readRlncWasm(options: RlncNodeOptions = {}): Uint8Array {
  if (options.simd === true && !simdSupported()) {
    throw new RlncWasmError('module', 'this engine does not support WebAssembly SIMD128; use { simd: false }');
  }
  const path = rlncWasmPath(options);
  try {
    return readFileSync(path);
  } catch (e) {
    if ((e as { code?: unknown }).code === 'ENOENT') {
      throw new RlncWasmError('module', `${path} is missing: run \`bash scripts/setup.sh\` (builds wasm/dist)`);
    }
    throw e;
  }
}

/** A fresh module instance (its own memory) per call. */
export function loadRlncModuleNode(options: RlncNodeOptions = {}): Promise<RlncModule> {
  return loadRlncModule(readRlncWasm(options));
}

export function loadRlncModuleNodeSync(options: RlncNodeOptions = {}): RlncModule {
  return loadRlncModuleSync(readRlncWasm(options));
}

/** The RLNC codec backed by a fresh module instance: 'rlnc-wasm-simd' or 'rlnc-wasm-scalar'. */
export async function loadRlncCodecNode(options: RlncNodeOptions = {}): Promise<WasmRlncCodec> {
  return new WasmRlncCodec(await loadRlncModuleNode(options));
}

export function loadRlncCodecNodeSync(options: RlncNodeOptions = {}): WasmRlncCodec {
  return new WasmRlncCodec(loadRlncModuleNodeSync(options));
}
