/**
 * The codecs of the downloader's MutpClient: `uncoded` from the core, `rlnc` and `fountain` from
 * the WebAssembly modules shipped in the extension package (wasm/, copied from wasm/dist at build
 * time). RLNC uses the SIMD128 module where the engine validates SIMD, else the scalar one; if the
 * WebAssembly cannot be loaded at all, rlnc falls back to the core's TypeScript codec (same
 * packets, slower) and fountain mode fails its downloads ('codec-unavailable' → network).
 */
import { Codec, Mode, rlncCodec, uncodedCodec } from '@mutp/shared';
import { fetchRlncCodec, fountainCodec, loadWirehair, RLNC_WASM_FILES, simdSupported } from '@mutp/wasm';

export const WIREHAIR_WASM_FILE = 'mutp-wirehair.wasm';
/** Folder of the .wasm files inside the extension package. */
export const WASM_DIR = 'wasm/';

export interface LoadedCodecs {
  codecs: Record<Mode, Codec>;
  /** Which implementation each mode got, for the popup and the logs. */
  names: Record<Mode, string>;
  /** False for a mode whose codec could not be loaded. */
  available: Record<Mode, boolean>;
  problems: string[];
}

/** A codec whose every use fails (its WebAssembly did not load). */
function unavailable(mode: Mode, why: string): Codec {
  const fail = (): never => {
    throw new Error(`codec-unavailable: ${mode}: ${why}`);
  };
  return { mode, name: `${mode}-unavailable`, createEncoder: fail, createDecoder: fail };
}

export async function loadCodecs(baseUrl: string, doFetch: typeof fetch = fetch): Promise<LoadedCodecs> {
  const base = baseUrl.replace(/\/?$/, '/');
  const problems: string[] = [];
  const simd = simdSupported();
  const [rlnc, fountain] = await Promise.all([
    fetchRlncCodec(base, { simd, fetch: (u) => doFetch(u) }).catch((e: unknown) => {
      problems.push(`rlnc (${simd ? RLNC_WASM_FILES.simd : RLNC_WASM_FILES.scalar}): ${String(e)}`);
      return rlncCodec;
    }),
    (async () => {
      const response = await doFetch(base + WIREHAIR_WASM_FILE);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return fountainCodec(await loadWirehair(await response.arrayBuffer()));
    })().catch((e: unknown) => {
      problems.push(`fountain (${WIREHAIR_WASM_FILE}): ${String(e)}`);
      return unavailable('fountain', String(e));
    }),
  ]);
  return {
    codecs: { uncoded: uncodedCodec, rlnc, fountain },
    names: { uncoded: uncodedCodec.name, rlnc: rlnc.name, fountain: fountain.name },
    available: { uncoded: true, rlnc: true, fountain: !fountain.name.endsWith('-unavailable') },
    problems,
  };
}
