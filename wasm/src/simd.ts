/**
 * WebAssembly SIMD128 feature detection without instantiating anything: `WebAssembly.validate`
 * on the smallest module that uses a v128 instruction. Engines without SIMD128 reject the v128
 * result type and the 0xFD-prefixed opcode, so validation fails there.
 */
import { webAssembly } from './wasm-loader';

/**
 * (module (func (result v128) i32.const 0 i8x16.splat)), assembled by hand:
 * header, type section [() -> v128], function section [type 0], code section [one body].
 */
const SIMD_PROBE = Uint8Array.from([
  ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // "\0asm", version 1
  ...[0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b], // type section: 1 type, func () -> (v128)
  ...[0x03, 0x02, 0x01, 0x00], // function section: 1 function of type 0
  ...[0x0a, 0x08, 0x01, 0x06, 0x00], // code section: 1 body of 6 bytes, no locals
  ...[0x41, 0x00, 0xfd, 0x0f, 0x0b], // i32.const 0, i8x16.splat, end
]);

let cached: boolean | undefined;

/** True when the engine validates WebAssembly SIMD128 (fixed-width) instructions. */
export function simdSupported(): boolean {
  if (cached === undefined) {
    const api = webAssembly();
    try {
      cached = !!api && api.validate(SIMD_PROBE);
    } catch {
      cached = false;
    }
  }
  return cached;
}

/** The probe module's bytes (a copy), for tests. */
export function simdProbeModule(): Uint8Array {
  return SIMD_PROBE.slice();
}
