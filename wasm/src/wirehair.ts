/**
 * The wirehair fountain code (Christopher A. Taylor, BSD-3-Clause; see wasm/THIRD_PARTY_NOTICES.md)
 * as a standalone WebAssembly module, `wasm/dist/mutp-wirehair.wasm`, built by
 * wasm/wirehair/build.sh. No Node built-ins here: works in browsers; wirehair-node.ts loads the
 * file in Node.
 *
 * A message of `messageBytes` is split into N = ceil(messageBytes / blockBytes) blocks
 * (2 ≤ N ≤ 64000). Block ids 0..N-1 are the message itself (the last one may be short), ids ≥ N are
 * repair blocks of `blockBytes`. Any N distinct blocks recover the message with high probability,
 * N+1 or N+2 almost surely. Block ids are u32 (0 ≤ id < 2^32); see {@link isUsableBlockId} for the
 * few that are excluded.
 *
 * Lifetimes are explicit: call `free()` on every encoder and decoder (memory lives in the module's
 * linear memory, which the garbage collector does not see). Use after free throws, double free is
 * a no-op. Views returned by `encodeView` / `recoverView` point into the module's memory: valid
 * until the next call into the module (which may grow and so detach the memory) or until free.
 */
import { ImportEnv } from './wirehair-imports';
import {
  instantiateWasm,
  instantiateWasmSync,
  LinearMemory,
  missingExports,
  WasmInstance,
  WasmMemory,
  WasmSource,
} from './wasm-loader';

export const WIREHAIR_MIN_BLOCKS = 2;
export const WIREHAIR_MAX_BLOCKS = 64_000;
/** Our limit (bounds memory use), not wirehair's. */
export const WIREHAIR_MAX_BLOCK_BYTES = 1 << 20;
/** Our limit: a decoder needs about 2.2× the message in a 2 GiB wasm32 memory. */
export const WIREHAIR_MAX_MESSAGE_BYTES = 1 << 28;
/** The exports the binding expects (`mutp_wh_abi_version`, see wasm/wirehair/src/abi.rs). */
export const WIREHAIR_ABI_VERSION = 1;

export type WirehairErrorCode =
  | 'invalid-params'
  | 'too-few-blocks'
  | 'too-many-blocks'
  | 'bad-block-id'
  | 'bad-length'
  | 'freed'
  | 'not-complete'
  | 'decoder-failed'
  | 'out-of-memory'
  | 'too-many-codecs'
  | 'module'
  | 'internal';

export class WirehairError extends Error {
  override readonly name = 'WirehairError';
  constructor(
    readonly code: WirehairErrorCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

/** Negative return codes of the C ABI (enum Error in wasm/wirehair/src/lib.rs). */
const ABI_ERRORS: Record<number, WirehairErrorCode> = {
  [-1]: 'internal', // bad handle or pointer: the binding never passes one
  [-2]: 'invalid-params',
  [-3]: 'too-few-blocks',
  [-4]: 'too-many-blocks',
  [-5]: 'bad-block-id',
  [-6]: 'bad-length',
  [-7]: 'internal', // wrong codec kind
  [-8]: 'internal', // already complete: handled by the binding
  [-9]: 'not-complete',
  [-10]: 'decoder-failed',
  [-11]: 'out-of-memory',
  [-12]: 'module', // wirehair_init_ failed
  [-13]: 'internal',
  [-14]: 'too-many-codecs',
};
const ERR_BAD_BLOCK_ID = -5;
const ERR_BAD_LENGTH = -6;
const ERR_ALREADY_COMPLETE = -8;

function abiError(code: number, what: string): WirehairError {
  return new WirehairError(ABI_ERRORS[code] ?? 'internal', `${what} failed (code ${code})`);
}

export interface WirehairParams {
  readonly messageBytes: number;
  readonly blockBytes: number;
  /** N */
  readonly blockCount: number;
  /** Length of block N-1, the only one that may be short. */
  readonly finalBlockBytes: number;
}

const isSize = (n: number, max: number) => Number.isInteger(n) && n >= 1 && n <= max;
const isBlockId = (id: number) => Number.isInteger(id) && id >= 0 && id <= 0xffff_ffff;

/** Validates the code parameters; throws WirehairError. */
export function wirehairParams(messageBytes: number, blockBytes: number): WirehairParams {
  if (!isSize(messageBytes, WIREHAIR_MAX_MESSAGE_BYTES)) {
    throw new WirehairError(
      'invalid-params',
      `message must be 1..${WIREHAIR_MAX_MESSAGE_BYTES} bytes, got ${messageBytes}`,
    );
  }
  if (!isSize(blockBytes, WIREHAIR_MAX_BLOCK_BYTES)) {
    throw new WirehairError(
      'invalid-params',
      `block size must be 1..${WIREHAIR_MAX_BLOCK_BYTES} bytes, got ${blockBytes}`,
    );
  }
  const blockCount = Math.ceil(messageBytes / blockBytes);
  if (blockCount < WIREHAIR_MIN_BLOCKS) {
    throw new WirehairError('too-few-blocks', `${messageBytes} bytes in ${blockBytes}-byte blocks is 1 block, need 2`);
  }
  if (blockCount > WIREHAIR_MAX_BLOCKS) {
    throw new WirehairError(
      'too-many-blocks',
      `${messageBytes} bytes in ${blockBytes}-byte blocks is ${blockCount} blocks, at most ${WIREHAIR_MAX_BLOCKS}`,
    );
  }
  return { messageBytes, blockBytes, blockCount, finalBlockBytes: messageBytes - (blockCount - 1) * blockBytes };
}

/**
 * Whether block `id` round-trips: an integer 0 ≤ id < 2^32, except, when the last block is short,
 * the repair ids id ≥ 65536 with id mod 65536 = N-1 (wirehair's encoder truncates those to the
 * last block's length because it compares only 16 bits of the id, and its decoder refuses them).
 * A sender that numbers repair blocks upwards should skip them.
 */
export function isUsableBlockId(params: WirehairParams, id: number): boolean {
  if (!isBlockId(id)) return false;
  return !(id >= 0x1_0000 && id % 0x1_0000 === params.blockCount - 1 && params.finalBlockBytes !== params.blockBytes);
}

/** Length of block `id` (finalBlockBytes for N-1, blockBytes otherwise); throws for unusable ids. */
export function blockLength(params: WirehairParams, id: number): number {
  if (!isUsableBlockId(params, id)) throw new WirehairError('bad-block-id', `block id ${id} is not usable`);
  return id === params.blockCount - 1 ? params.finalBlockBytes : params.blockBytes;
}

export interface WirehairEncoder {
  readonly params: WirehairParams;
  readonly freed: boolean;
  /** Block `blockId` as new bytes, or written to `out` (returns the filled `out.subarray`). */
  encode(blockId: number, out?: Uint8Array): Uint8Array;
  /** Block `blockId` as a view into the module's memory, valid until the next call into it. */
  encodeView(blockId: number): Uint8Array;
  free(): void;
}

export type WirehairDecodeResult = 'need-more' | 'complete' | 'invalid';

export interface WirehairDecoder {
  readonly params: WirehairParams;
  readonly freed: boolean;
  /** Distinct blocks accepted so far (duplicates and invalid blocks not counted). */
  readonly received: number;
  readonly complete: boolean;
  /**
   * Feeds one block. 'invalid': wrong length or unusable id (block ignored). A duplicate id is
   * ignored ('need-more'); once complete every further block is ignored and 'complete' returned.
   * `data` must be exactly the block's length; block N-1 may also come zero-padded to blockBytes.
   * Throws WirehairError 'decoder-failed' in the (never observed) case that wirehair gives up.
   */
  decode(blockId: number, data: Uint8Array): WirehairDecodeResult;
  /**
   * A scratch buffer of blockBytes in the module's memory: write a block there and pass this view
   * (or a prefix subarray of it) to `decode` to save one copy. Valid until the next call.
   */
  inputView(): Uint8Array;
  /** The message (a copy). Throws 'not-complete' before decode returned 'complete'. */
  recover(): Uint8Array;
  /** The message as a view into the module's memory (valid until the next call or free). */
  recoverView(): Uint8Array;
  free(): void;
}

export interface Wirehair {
  createEncoder(message: Uint8Array, blockBytes: number): WirehairEncoder;
  createDecoder(messageBytes: number, blockBytes: number): WirehairDecoder;
  /** Heap bytes in use inside the module (dlmalloc's in-use bytes: wirehair's and ours). */
  allocatedBytes(): number;
  /** Encoders and decoders created and not freed yet. */
  liveCodecs(): number;
  /** Size of the module's linear memory (it only grows). */
  memoryBytes(): number;
}

const moduleError = (message: string) => new WirehairError('module', message);

/** Loads the module (compiles bytes, or instantiates a compiled module). */
export async function loadWirehair(source: WasmSource): Promise<Wirehair> {
  const env = new ImportEnv(moduleError);
  return new WirehairModule(await instantiateWasm(source, (declared) => env.build(declared), moduleError), env);
}

/** Synchronous variant (Node, workers; browsers limit synchronous compilation on the main thread). */
export function loadWirehairSync(source: WasmSource): Wirehair {
  const env = new ImportEnv(moduleError);
  return new WirehairModule(
    instantiateWasmSync(source, (declared) => env.build(declared), moduleError),
    env,
  );
}

/** The C ABI of wasm/wirehair/src/abi.rs. Pointers and handles are u32 (read back with >>> 0). */
interface Exports {
  memory: WasmMemory;
  _initialize?: () => void;
  mutp_wh_abi_version(): number;
  mutp_wh_init(): number;
  mutp_wh_alloc(n: number): number;
  mutp_wh_free_bytes(p: number, n: number): void;
  mutp_wh_encoder_create(msg: number, msgBytes: number, blockBytes: number): number;
  mutp_wh_encode(enc: number, blockId: number, out: number, outBytes: number): number;
  mutp_wh_decoder_create(msgBytes: number, blockBytes: number): number;
  mutp_wh_decode(dec: number, blockId: number, data: number, dataBytes: number): number;
  mutp_wh_recover(dec: number, out: number, outBytes: number): number;
  mutp_wh_codec_free(handle: number): number;
  mutp_wh_last_error(): number;
  mutp_wh_allocated_bytes(): number;
  mutp_wh_live_codecs(): number;
}

const REQUIRED_EXPORTS = [
  'mutp_wh_abi_version',
  'mutp_wh_init',
  'mutp_wh_alloc',
  'mutp_wh_free_bytes',
  'mutp_wh_encoder_create',
  'mutp_wh_encode',
  'mutp_wh_decoder_create',
  'mutp_wh_decode',
  'mutp_wh_recover',
  'mutp_wh_codec_free',
  'mutp_wh_last_error',
  'mutp_wh_allocated_bytes',
  'mutp_wh_live_codecs',
];

class WirehairModule extends LinearMemory implements Wirehair {
  readonly x: Exports;

  constructor(instance: WasmInstance, env: ImportEnv) {
    const missing = missingExports(instance.exports, REQUIRED_EXPORTS);
    if (missing.length > 0) {
      throw new WirehairError(
        'module',
        `exports missing (${missing.join(', ')}): rebuild wasm/dist/mutp-wirehair.wasm`,
      );
    }
    const x = instance.exports as unknown as Exports;
    super(x.memory);
    this.x = x;
    env.memory = this.x.memory;
    this.x._initialize?.();
    const abi = this.x.mutp_wh_abi_version();
    if (abi !== WIREHAIR_ABI_VERSION) {
      throw new WirehairError(
        'module',
        `module ABI ${abi}, binding expects ${WIREHAIR_ABI_VERSION}: rebuild wasm/dist/mutp-wirehair.wasm`,
      );
    }
    const init = this.x.mutp_wh_init();
    if (init !== 0) throw abiError(init, 'wirehair_init');
  }

  alloc(n: number): number {
    const p = this.x.mutp_wh_alloc(n) >>> 0;
    if (p === 0) throw new WirehairError('out-of-memory', `could not allocate ${n} bytes in the wasm heap`);
    return p;
  }

  release(p: number, n: number): void {
    if (p !== 0) this.x.mutp_wh_free_bytes(p, n);
  }

  createEncoder(message: Uint8Array, blockBytes: number): WirehairEncoder {
    const params = wirehairParams(message.length, blockBytes);
    return new Encoder(this, params, message);
  }

  createDecoder(messageBytes: number, blockBytes: number): WirehairDecoder {
    return new Decoder(this, wirehairParams(messageBytes, blockBytes));
  }

  allocatedBytes(): number {
    return this.x.mutp_wh_allocated_bytes() >>> 0;
  }

  liveCodecs(): number {
    return this.x.mutp_wh_live_codecs() >>> 0;
  }
}

function freedError(what: string): WirehairError {
  return new WirehairError('freed', `${what} used after free()`);
}

class Encoder implements WirehairEncoder {
  private handle = 0;
  private messagePtr = 0;
  private blockPtr = 0;

  constructor(
    private readonly m: WirehairModule,
    readonly params: WirehairParams,
    message: Uint8Array,
  ) {
    try {
      // The one copy of the message into wasm memory; wirehair keeps a pointer to it, so it is
      // freed only after the encoder.
      this.messagePtr = m.alloc(params.messageBytes);
      m.heap().set(message, this.messagePtr);
      this.blockPtr = m.alloc(params.blockBytes);
      this.handle = m.x.mutp_wh_encoder_create(this.messagePtr, params.messageBytes, params.blockBytes) >>> 0;
      if (this.handle === 0) throw abiError(m.x.mutp_wh_last_error(), 'wirehair_encoder_create');
    } catch (e) {
      this.free();
      throw e;
    }
  }

  get freed(): boolean {
    return this.handle === 0;
  }

  /** Encodes into the block scratch buffer; returns the length. */
  private run(blockId: number): number {
    if (this.handle === 0) throw freedError('encoder');
    if (!isUsableBlockId(this.params, blockId)) {
      throw new WirehairError('bad-block-id', `block id ${blockId} is not usable`);
    }
    const r = this.m.x.mutp_wh_encode(this.handle, blockId, this.blockPtr, this.params.blockBytes);
    if (r < 0) throw abiError(r, `encode(${blockId})`);
    return r;
  }

  encode(blockId: number, out?: Uint8Array): Uint8Array {
    const len = this.run(blockId);
    const target = out ?? new Uint8Array(len);
    if (target.length < len) throw new WirehairError('bad-length', `block ${blockId} needs ${len} bytes`);
    target.set(this.m.heap().subarray(this.blockPtr, this.blockPtr + len));
    return target.length === len ? target : target.subarray(0, len);
  }

  encodeView(blockId: number): Uint8Array {
    const len = this.run(blockId);
    return this.m.heap().subarray(this.blockPtr, this.blockPtr + len);
  }

  free(): void {
    if (this.handle !== 0) this.m.x.mutp_wh_codec_free(this.handle);
    this.handle = 0;
    this.m.release(this.blockPtr, this.params.blockBytes);
    this.blockPtr = 0;
    this.m.release(this.messagePtr, this.params.messageBytes);
    this.messagePtr = 0;
  }
}

class Decoder implements WirehairDecoder {
  private handle = 0;
  private blockPtr = 0;
  private outPtr = 0;
  private recovered = false;
  private receivedCount = 0;
  private isComplete = false;

  constructor(
    private readonly m: WirehairModule,
    readonly params: WirehairParams,
  ) {
    try {
      this.blockPtr = m.alloc(params.blockBytes);
      this.handle = m.x.mutp_wh_decoder_create(params.messageBytes, params.blockBytes) >>> 0;
      if (this.handle === 0) throw abiError(m.x.mutp_wh_last_error(), 'wirehair_decoder_create');
    } catch (e) {
      this.free();
      throw e;
    }
  }

  get freed(): boolean {
    return this.handle === 0;
  }

  get received(): number {
    return this.receivedCount;
  }

  get complete(): boolean {
    return this.isComplete;
  }

  inputView(): Uint8Array {
    if (this.handle === 0) throw freedError('decoder');
    return this.m.heap().subarray(this.blockPtr, this.blockPtr + this.params.blockBytes);
  }

  decode(blockId: number, data: Uint8Array): WirehairDecodeResult {
    if (this.handle === 0) throw freedError('decoder');
    if (this.isComplete) return 'complete';
    if (!isUsableBlockId(this.params, blockId) || data.length > this.params.blockBytes) return 'invalid';
    const memory = this.m.heap();
    // A view of the input scratch buffer (see inputView) needs no copy.
    if (data.buffer !== memory.buffer || data.byteOffset !== this.blockPtr) memory.set(data, this.blockPtr);
    const r = this.m.x.mutp_wh_decode(this.handle, blockId, this.blockPtr, data.length);
    switch (r) {
      case 0:
        this.receivedCount++;
        return 'need-more';
      case 1:
        this.receivedCount++;
        this.isComplete = true;
        return 'complete';
      case 2:
        return 'need-more'; // duplicate id, ignored
      case ERR_BAD_BLOCK_ID:
      case ERR_BAD_LENGTH:
        return 'invalid';
      case ERR_ALREADY_COMPLETE:
        return 'complete';
      default:
        throw abiError(r, `decode(${blockId})`);
    }
  }

  /** Recovers into the output buffer once; returns its address. */
  private recoverInto(): number {
    if (this.handle === 0) throw freedError('decoder');
    if (!this.isComplete) throw new WirehairError('not-complete', 'recover() before decode() returned complete');
    if (!this.recovered) {
      if (this.outPtr === 0) this.outPtr = this.m.alloc(this.params.messageBytes);
      const r = this.m.x.mutp_wh_recover(this.handle, this.outPtr, this.params.messageBytes);
      if (r < 0) throw abiError(r, 'recover');
      this.recovered = true;
    }
    return this.outPtr;
  }

  recover(): Uint8Array {
    const p = this.recoverInto();
    return this.m.heap().slice(p, p + this.params.messageBytes);
  }

  recoverView(): Uint8Array {
    const p = this.recoverInto();
    return this.m.heap().subarray(p, p + this.params.messageBytes);
  }

  free(): void {
    if (this.handle !== 0) this.m.x.mutp_wh_codec_free(this.handle);
    this.handle = 0;
    this.m.release(this.blockPtr, this.params.blockBytes);
    this.blockPtr = 0;
    this.m.release(this.outPtr, this.params.messageBytes);
    this.outPtr = 0;
  }
}
