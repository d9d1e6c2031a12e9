/**
 * RLNC over GF(2^8) in C (wasm/rlnc), compiled to two standalone WebAssembly modules:
 * `mutp-rlnc-simd.wasm` (SIMD128 split-nibble kernels) and `mutp-rlnc-scalar.wasm` (table
 * kernels), both built by wasm/rlnc/build.sh. This file binds them to the core's `Codec`
 * interface; the packets are byte-identical to the TypeScript reference (`rlncCodec`).
 *
 * No Node built-ins here: it loads in browsers (`fetchRlncCodec`, or `loadRlncModuleStreaming`
 * with a `fetch` response) as in Node (rlnc-node.ts reads the files).
 *
 * Lifetimes are explicit: call `free()` on every encoder and decoder (their memory lives in the
 * module's linear memory, which the garbage collector does not see). Use after free throws a
 * `RlncWasmError` with code 'freed'; a second `free()` is a no-op. Views into wasm memory
 * (`objectView`, `WasmRegion.bytes`) are valid until the next call into the module that may grow
 * memory (a decoder `add`, any allocation) or until free; the other methods return copies.
 */
import { AddResult, Codec, Layout, UnitDecoder, UnitEncoder } from '@mutp/shared';
import { simdSupported } from './simd';
import {
  instantiateWasm,
  instantiateWasmStreaming,
  instantiateWasmSync,
  LinearMemory,
  missingExports,
  WasmInstance,
  WasmMemory,
  WasmResponseLike,
  WasmSource,
} from './wasm-loader';

/** The ABI version the binding expects (`MUTP_RLNC_ABI_VERSION` in mutp_rlnc.h). */
export const RLNC_ABI_VERSION = 1;
/** File names of the two modules in wasm/dist. */
export const RLNC_WASM_FILES = { simd: 'mutp-rlnc-simd.wasm', scalar: 'mutp-rlnc-scalar.wasm' } as const;
/** Limits of the C core (checked here too, so errors name the field). */
export const RLNC_MAX_GENERATION_SIZE = 255;
export const RLNC_MAX_SYMBOL_SIZE = 65535;
export const RLNC_MAX_OBJECT_BYTES = 1 << 30;

export type RlncWasmErrorCode =
  'bad-parameter' | 'bad-length' | 'out-of-range' | 'out-of-memory' | 'incomplete' | 'freed' | 'module';

export class RlncWasmError extends Error {
  override readonly name = 'RlncWasmError';
  constructor(
    readonly code: RlncWasmErrorCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

/** Status codes of the C ABI (enum mutp_rlnc_status). */
const ERR_PARAM = -1;
const ERR_LENGTH = -2;
const ERR_RANGE = -3;
const ERR_NOMEM = -4;
const STATUS_CODES: Record<number, RlncWasmErrorCode> = {
  [ERR_PARAM]: 'bad-parameter',
  [ERR_LENGTH]: 'bad-length',
  [ERR_RANGE]: 'out-of-range',
  [ERR_NOMEM]: 'out-of-memory',
};

function statusError(status: number, what: string): RlncWasmError {
  return new RlncWasmError(STATUS_CODES[status] ?? 'module', `${what} failed (status ${status})`);
}

// ------------------------------------------------------------------ loading (wasm-loader.ts)

const moduleError = (message: string) => new RlncWasmError('module', message);

/**
 * The modules import nothing (the C side defines emscripten_notify_memory_growth itself); the
 * stub is passed anyway so that a build which does import it still links.
 */
const IMPORTS = { env: { emscripten_notify_memory_growth() {} } };

// ------------------------------------------------------------------ the module

/** The C ABI of wasm/rlnc/include/mutp_rlnc.h. Pointers are u32 (read back with >>> 0). */
export interface RlncExports {
  memory: WasmMemory;
  _initialize?: () => void;
  mutp_abi_version(): number;
  mutp_rlnc_simd(): number;
  mutp_rlnc_last_error(): number;
  mutp_alloc(n: number): number;
  mutp_free(p: number): void;
  mutp_allocated_bytes(): number;
  mutp_live_allocations(): number;
  mutp_gf256_muladd(dst: number, src: number, c: number, n: number): void;
  mutp_gf256_mul(dst: number, c: number, n: number): void;
  mutp_rlnc_coefficients(seed: number, out: number, count: number): void;
  mutp_rlnc_encoder_new(object: number, objectLen: number, symbolSize: number, generationSize: number): number;
  mutp_rlnc_encode(enc: number, generation: number, seed: number, out: number): number;
  mutp_rlnc_encoder_free(enc: number): void;
  mutp_rlnc_decoder_new(objectLen: number, symbolSize: number, generationSize: number): number;
  mutp_rlnc_decoder_add(dec: number, generation: number, seed: number, payload: number, len: number): number;
  mutp_rlnc_decoder_rank(dec: number, generation: number): number;
  mutp_rlnc_decoder_complete(dec: number): number;
  mutp_rlnc_decoder_object(dec: number): number;
  mutp_rlnc_decoder_free(dec: number): void;
}

const REQUIRED_EXPORTS: (keyof RlncExports)[] = [
  'mutp_abi_version',
  'mutp_rlnc_simd',
  'mutp_rlnc_last_error',
  'mutp_alloc',
  'mutp_free',
  'mutp_allocated_bytes',
  'mutp_live_allocations',
  'mutp_gf256_muladd',
  'mutp_gf256_mul',
  'mutp_rlnc_coefficients',
  'mutp_rlnc_encoder_new',
  'mutp_rlnc_encode',
  'mutp_rlnc_encoder_free',
  'mutp_rlnc_decoder_new',
  'mutp_rlnc_decoder_add',
  'mutp_rlnc_decoder_rank',
  'mutp_rlnc_decoder_complete',
  'mutp_rlnc_decoder_object',
  'mutp_rlnc_decoder_free',
];

function checkRlncExports(wasmExports: Record<string, unknown>): RlncExports {
  const missing = missingExports(wasmExports, REQUIRED_EXPORTS);
  if (missing.length > 0) {
    throw new RlncWasmError('module', `not an RLNC module (missing exports: ${missing.join(', ')})`);
  }
  const checked = wasmExports as unknown as RlncExports;
  const abi = checked.mutp_abi_version();
  if (abi !== RLNC_ABI_VERSION) {
    throw new RlncWasmError('module', `ABI version ${abi}, expected ${RLNC_ABI_VERSION}: rebuild wasm/dist`);
  }
  return checked;
}

/** A block of wasm memory (from `RlncModule.region`), for the raw kernels. */
export class WasmRegion {
  private freed = false;

  constructor(
    private readonly module: RlncModule,
    /** Byte offset in the module's memory. */
    readonly ptr: number,
    readonly length: number,
  ) {}

  /** A view of the region: valid until the module's memory grows (any allocation) or free. */
  get bytes(): Uint8Array {
    if (this.freed) throw new RlncWasmError('freed', 'region used after free()');
    return this.module.heap().subarray(this.ptr, this.ptr + this.length);
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.module.free(this.ptr);
  }
}

/** One instance of an RLNC module: its memory, the raw kernels and the allocation counters. */
export class RlncModule extends LinearMemory {
  /** True for the SIMD128 build. */
  readonly simd: boolean;

  constructor(private readonly wasmExports: RlncExports) {
    super(wasmExports.memory);
    this.simd = wasmExports.mutp_rlnc_simd() === 1;
  }

  /** Allocates n bytes of wasm memory (counted by `allocatedBytes`); throws when out of memory. */
  alloc(n: number): number {
    if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new RlncWasmError('bad-parameter', `alloc(${n})`);
    const ptr = this.wasmExports.mutp_alloc(n) >>> 0;
    if (ptr === 0) throw new RlncWasmError('out-of-memory', `cannot allocate ${n} bytes of wasm memory`);
    return ptr;
  }

  /** Frees a block from `alloc` (0 is a no-op). */
  free(ptr: number): void {
    this.wasmExports.mutp_free(ptr);
  }

  /** A region of n bytes of wasm memory. */
  region(n: number): WasmRegion {
    return new WasmRegion(this, this.alloc(n), n);
  }

  /** Bytes currently allocated in the module by this library (not the memory size, which never shrinks). */
  allocatedBytes(): number {
    return this.wasmExports.mutp_allocated_bytes() >>> 0;
  }

  /** Number of live allocations in the module. */
  liveAllocations(): number {
    return this.wasmExports.mutp_live_allocations() >>> 0;
  }

  /** dst[i] ^= c * src[i] for i < n (default: the shorter region), with the module's best kernel. */
  muladd(dst: WasmRegion, src: WasmRegion, c: number, n: number = Math.min(dst.length, src.length)): void {
    if (!Number.isInteger(n) || n < 0 || n > dst.length || n > src.length) {
      throw new RlncWasmError('bad-length', `muladd of ${n} bytes`);
    }
    this.wasmExports.mutp_gf256_muladd(dst.ptr, src.ptr, c & 0xff, n);
  }

  /** dst[i] = c * dst[i] for i < n (default: the whole region). */
  mul(dst: WasmRegion, c: number, n: number = dst.length): void {
    if (!Number.isInteger(n) || n < 0 || n > dst.length) throw new RlncWasmError('bad-length', `mul of ${n} bytes`);
    this.wasmExports.mutp_gf256_mul(dst.ptr, c & 0xff, n);
  }

  /** The first `count` (≤ 255) coefficients of `seed`, computed by the C generator. */
  coefficients(seed: number, count: number): Uint8Array {
    if (!Number.isInteger(count) || count < 0 || count > RLNC_MAX_GENERATION_SIZE) {
      throw new RlncWasmError('bad-parameter', `coefficient count ${count}`);
    }
    const ptr = this.alloc(count);
    try {
      this.wasmExports.mutp_rlnc_coefficients(seed >>> 0, ptr, count);
      return this.heap().slice(ptr, ptr + count);
    } finally {
      this.free(ptr);
    }
  }

  /** The raw C ABI, for callers that manage wasm memory themselves. */
  get abi(): RlncExports {
    return this.wasmExports;
  }
}

function instanceToModule(instance: WasmInstance): RlncModule {
  const wasmExports = checkRlncExports(instance.exports);
  wasmExports._initialize?.();
  return new RlncModule(wasmExports);
}

/** Loads a module from its bytes or from a compiled `WebAssembly.Module`. */
export async function loadRlncModule(source: WasmSource): Promise<RlncModule> {
  return instanceToModule(await instantiateWasm(source, () => IMPORTS, moduleError));
}

/** Synchronous variant (Node, workers; browsers limit synchronous compilation on the main thread). */
export function loadRlncModuleSync(source: WasmSource): RlncModule {
  return instanceToModule(instantiateWasmSync(source, () => IMPORTS, moduleError));
}

/**
 * Loads a module from a `fetch` response (or a promise of one), compiling while it downloads
 * with `WebAssembly.instantiateStreaming` when available (the server must send
 * `Content-Type: application/wasm`), else from the whole body.
 */
export async function loadRlncModuleStreaming(
  response: WasmResponseLike | PromiseLike<WasmResponseLike>,
): Promise<RlncModule> {
  return instanceToModule(await instantiateWasmStreaming(response, IMPORTS, moduleError));
}

// ------------------------------------------------------------------ the codec

function checkLayout(layout: Layout): void {
  const { mode, objectLength, symbolSize, generationSize } = layout;
  const bad = (what: string) => new RlncWasmError('bad-parameter', what);
  if (mode !== 'rlnc') throw bad(`layout mode is '${mode}', expected 'rlnc'`);
  if (!Number.isInteger(generationSize) || generationSize < 1 || generationSize > RLNC_MAX_GENERATION_SIZE) {
    throw bad(`generation size ${generationSize} outside 1..${RLNC_MAX_GENERATION_SIZE}`);
  }
  if (!Number.isInteger(symbolSize) || symbolSize < 1 || symbolSize > RLNC_MAX_SYMBOL_SIZE) {
    throw bad(`symbol size ${symbolSize} outside 1..${RLNC_MAX_SYMBOL_SIZE}`);
  }
  if (!Number.isInteger(objectLength) || objectLength < 0 || objectLength > RLNC_MAX_OBJECT_BYTES) {
    throw bad(`object length ${objectLength} outside 0..${RLNC_MAX_OBJECT_BYTES}`);
  }
}

const validUnit = (layout: Layout, unit: number) => Number.isInteger(unit) && unit >= 0 && unit < layout.unitCount;

/** Encoder over a copy of the object in wasm memory (made once, at creation). */
export class WasmRlncEncoder implements UnitEncoder {
  readonly mode = 'rlnc' as const;
  private handle = 0;
  private objectPtr = 0;
  /** symbolSize bytes: the packet, copied out after each encode. */
  private scratch = 0;

  constructor(
    private readonly module: RlncModule,
    object: Uint8Array,
    readonly layout: Layout,
  ) {
    checkLayout(layout);
    if (object.length !== layout.objectLength) {
      throw new RlncWasmError('bad-parameter', `object of ${object.length} bytes, layout says ${layout.objectLength}`);
    }
    const abi = module.abi;
    try {
      this.objectPtr = module.alloc(object.length);
      module.heap().set(object, this.objectPtr);
      this.scratch = module.alloc(layout.symbolSize);
      this.handle =
        abi.mutp_rlnc_encoder_new(this.objectPtr, object.length, layout.symbolSize, layout.generationSize) >>> 0;
      if (this.handle === 0) throw statusError(abi.mutp_rlnc_last_error(), 'mutp_rlnc_encoder_new');
    } catch (e) {
      this.release();
      throw e;
    }
  }

  /** Writes the payload of (generation, seed), symbolSize bytes, into out. */
  encodeInto(generation: number, seed: number, out: Uint8Array): void {
    this.live();
    if (!validUnit(this.layout, generation)) {
      throw new RlncWasmError('out-of-range', `generation ${generation} of ${this.layout.unitCount}`);
    }
    if (out.length < this.layout.symbolSize) {
      throw new RlncWasmError('bad-length', `output of ${out.length} bytes for symbols of ${this.layout.symbolSize}`);
    }
    const status = this.module.abi.mutp_rlnc_encode(this.handle, generation, seed >>> 0, this.scratch);
    if (status < 0) throw statusError(status, 'mutp_rlnc_encode');
    out.set(this.module.heap().subarray(this.scratch, this.scratch + this.layout.symbolSize));
  }

  free(): void {
    this.release();
  }

  private live(): void {
    if (this.handle === 0) throw new RlncWasmError('freed', 'RLNC encoder used after free()');
  }

  private release(): void {
    const abi = this.module.abi;
    if (this.handle !== 0) abi.mutp_rlnc_encoder_free(this.handle);
    if (this.scratch !== 0) abi.mutp_free(this.scratch);
    if (this.objectPtr !== 0) abi.mutp_free(this.objectPtr);
    this.handle = this.scratch = this.objectPtr = 0;
  }
}

/** Decoder: on-the-fly Gauss-Jordan in wasm memory, the object decoded in place. */
export class WasmRlncDecoder implements UnitDecoder {
  readonly mode = 'rlnc' as const;
  private handle = 0;
  /** symbolSize bytes: the payload of the packet being added. */
  private scratch = 0;

  constructor(
    private readonly module: RlncModule,
    readonly layout: Layout,
  ) {
    checkLayout(layout);
    const abi = module.abi;
    try {
      this.scratch = module.alloc(layout.symbolSize);
      this.handle = abi.mutp_rlnc_decoder_new(layout.objectLength, layout.symbolSize, layout.generationSize) >>> 0;
      if (this.handle === 0) throw statusError(abi.mutp_rlnc_last_error(), 'mutp_rlnc_decoder_new');
    } catch (e) {
      this.release();
      throw e;
    }
  }

  /** 'invalid' for a generation out of range or a payload that is not symbolSize bytes. */
  add(generation: number, seed: number, payload: Uint8Array): AddResult {
    this.live();
    if (!validUnit(this.layout, generation) || payload.length !== this.layout.symbolSize) return 'invalid';
    this.module.heap().set(payload, this.scratch);
    const abi = this.module.abi;
    return this.result(abi.mutp_rlnc_decoder_add(this.handle, generation, seed >>> 0, this.scratch, payload.length));
  }

  rank(generation: number): number {
    this.live();
    if (!validUnit(this.layout, generation)) return 0;
    return Math.max(0, this.module.abi.mutp_rlnc_decoder_rank(this.handle, generation));
  }

  isComplete(generation: number): boolean {
    return validUnit(this.layout, generation) && this.rank(generation) === this.layout.unitSize(generation);
  }

  /** Number of complete generations. */
  completeUnits(): number {
    this.live();
    return this.module.abi.mutp_rlnc_decoder_complete(this.handle);
  }

  /** A copy of the decoded object; throws RlncWasmError 'incomplete' unless every generation is complete. */
  readObject(): Uint8Array {
    return this.objectView().slice();
  }

  /**
   * The decoded object in place in wasm memory, without a copy: valid until the next call that
   * may grow the module's memory (an `add` on any decoder of this module, any create) or free().
   */
  objectView(): Uint8Array {
    this.live();
    const { layout } = this;
    if (this.completeUnits() !== layout.unitCount) {
      let g = 0;
      while (this.isComplete(g)) g++;
      throw new RlncWasmError('incomplete', `generation ${g} is not decoded`);
    }
    if (layout.objectLength === 0) return new Uint8Array(0);
    const ptr = this.module.abi.mutp_rlnc_decoder_object(this.handle) >>> 0;
    return this.module.heap().subarray(ptr, ptr + layout.objectLength);
  }

  free(): void {
    this.release();
  }

  private result(status: number): AddResult {
    if (status === 1) return 'innovative';
    if (status === 0) return 'redundant';
    if (status === ERR_NOMEM) throw statusError(status, 'mutp_rlnc_decoder_add');
    return 'invalid';
  }

  private live(): void {
    if (this.handle === 0) throw new RlncWasmError('freed', 'RLNC decoder used after free()');
  }

  private release(): void {
    const abi = this.module.abi;
    if (this.handle !== 0) abi.mutp_rlnc_decoder_free(this.handle);
    if (this.scratch !== 0) abi.mutp_free(this.scratch);
    this.handle = this.scratch = 0;
  }
}

/** The WebAssembly RLNC codec; create* throw `RlncWasmError` ('bad-parameter', 'out-of-memory'). */
export class WasmRlncCodec implements Codec {
  readonly mode = 'rlnc' as const;
  readonly name: 'rlnc-wasm-simd' | 'rlnc-wasm-scalar';

  constructor(readonly module: RlncModule) {
    this.name = module.simd ? 'rlnc-wasm-simd' : 'rlnc-wasm-scalar';
  }

  createEncoder(object: Uint8Array, layout: Layout): WasmRlncEncoder {
    return new WasmRlncEncoder(this.module, object, layout);
  }

  createDecoder(layout: Layout): WasmRlncDecoder {
    return new WasmRlncDecoder(this.module, layout);
  }

  /** The encoder's copy of the object in wasm memory (plus a scratch row). */
  encoderBytes(objectLength: number): number {
    return objectLength + 4096;
  }
}

/** Loads a module (bytes or compiled) and wraps it as a codec. */
export async function loadRlncCodec(source: WasmSource): Promise<WasmRlncCodec> {
  return new WasmRlncCodec(await loadRlncModule(source));
}

/**
 * Browser loader: fetches `${baseUrl}/mutp-rlnc-{simd,scalar}.wasm` (SIMD when the engine supports
 * it, unless `simd` says otherwise) and compiles it while it streams.
 */
export async function fetchRlncCodec(
  baseUrl: string | URL,
  options: { simd?: boolean; fetch?: (url: string) => PromiseLike<WasmResponseLike> } = {},
): Promise<WasmRlncCodec> {
  const simd = options.simd ?? simdSupported();
  const base = String(baseUrl).replace(/\/?$/, '/');
  const url = base + (simd ? RLNC_WASM_FILES.simd : RLNC_WASM_FILES.scalar);
  const doFetch = options.fetch ?? ((u: string) => fetch(u));
  return new WasmRlncCodec(await loadRlncModuleStreaming(doFetch(url)));
}
