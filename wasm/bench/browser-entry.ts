/** Page side of bench:codec: loads the modules from base64 and runs measure.ts in Chromium. */
import { loadRlncModule } from '../src/rlnc';
import { loadWirehair } from '../src/wirehair';
import { CodecRow, measureAll } from './measure';

function fromBase64(b64: string): Uint8Array {
  const text = atob(b64);
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}

async function runCodecBench(
  wasm: { simd: string; scalar: string; wirehair: string },
  minMs: number,
  repeats: number,
): Promise<CodecRow[]> {
  const modules = {
    rlnc: { simd: await loadRlncModule(fromBase64(wasm.simd)), scalar: await loadRlncModule(fromBase64(wasm.scalar)) },
    wirehair: await loadWirehair(fromBase64(wasm.wirehair)),
  };
  return measureAll(modules, { env: 'chromium', minMs, repeats, clock: () => performance.now() });
}

(globalThis as unknown as { runCodecBench: typeof runCodecBench }).runCodecBench = runCodecBench;
