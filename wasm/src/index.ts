/**
 * The WebAssembly coding cores behind the protocol core's Codec interface. Browser-safe: nothing
 * here touches the file system; Node hosts load the modules with `@mutp/wasm/node`.
 */
export * from './simd';
export * from './rlnc';
export * from './wirehair';
export type { WasmResponseLike, WasmSource } from './wasm-loader';
export { fountainCodec } from './fountain';
export { RecyclingCodec } from './recycling';
export type { CodecInstance, RecyclingStats } from './recycling';
