/** Node hosts (proxy, Node client, simulator, benchmarks): load the modules from wasm/dist. */
import { Codec, Mode, uncodedCodec } from '@mutp/shared';
import { fountainCodec } from './fountain';
import { loadRlncCodecNode, RlncNodeOptions } from './rlnc-node';
import { loadWirehairNode } from './wirehair-node';

export * from './rlnc-node';
export * from './wirehair-node';

/** One codec per mode: uncoded, the WebAssembly RLNC (SIMD when the engine has it), wirehair. */
export async function loadNodeCodecs(options: RlncNodeOptions = {}): Promise<Record<Mode, Codec>> {
  const [rlnc, wirehair] = await Promise.all([loadRlncCodecNode(options), loadWirehairNode()]);
  return { uncoded: uncodedCodec, rlnc, fountain: fountainCodec(wirehair) };
}
