/** Node hosts (proxy, Node client, simulator, benchmarks): load the modules from wasm/dist. */
import { Codec, Mode, uncodedCodec } from '@mutp/shared';
import { fountainCodec } from './fountain';
import { RecyclingCodec } from './recycling';
import { loadRlncModuleSync, WasmRlncCodec } from './rlnc';
import { loadRlncCodecNode, readRlncWasm, RlncNodeOptions } from './rlnc-node';
import { loadWirehairSync } from './wirehair';
import { loadWirehairNode, readWirehairWasm } from './wirehair-node';
import { requireWebAssembly } from './wasm-loader';

export * from './rlnc-node';
export * from './wirehair-node';

export interface NodeCodecOptions extends RlncNodeOptions {
  /**
   * Replace a codec's WebAssembly instance when it is idle and its memory exceeds this many
   * bytes (long-running services: linear memory never shrinks). Default: never.
   */
  recycleAboveBytes?: number;
}

/** One codec per mode: uncoded, the WebAssembly RLNC (SIMD when the engine has it), wirehair. */
export async function loadNodeCodecs(options: NodeCodecOptions = {}): Promise<Record<Mode, Codec>> {
  if (options.recycleAboveBytes !== undefined) {
    // Compile once; each recycled instance is a cheap synchronous instantiation of it.
    const { Module } = requireWebAssembly((message) => new Error(message));
    const rlncModule = new Module(readRlncWasm(options));
    const wirehairModule = new Module(readWirehairWasm());
    const keep = options.recycleAboveBytes;
    const rlnc = new RecyclingCodec(() => {
      const module = loadRlncModuleSync(rlncModule);
      return { codec: new WasmRlncCodec(module), memoryBytes: () => module.memoryBytes() };
    }, keep);
    const fountain = new RecyclingCodec(() => {
      const wirehair = loadWirehairSync(wirehairModule);
      return { codec: fountainCodec(wirehair), memoryBytes: () => wirehair.memoryBytes() };
    }, keep);
    return { uncoded: uncodedCodec, rlnc, fountain };
  }
  const [rlnc, wirehair] = await Promise.all([loadRlncCodecNode(options), loadWirehairNode()]);
  return { uncoded: uncodedCodec, rlnc, fountain: fountainCodec(wirehair) };
}
