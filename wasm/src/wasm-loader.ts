/**
 * What the bindings of the standalone WebAssembly modules (rlnc.ts, wirehair.ts) share to load
 * one: minimal typings of the WebAssembly API (the project's TypeScript lib has no DOM types),
 * instantiation from bytes or a compiled `WebAssembly.Module` (asynchronous, synchronous, or
 * streamed from a `fetch` response), the check of the exports a binding needs, and the instance's
 * memory as bytes. No Node built-ins: it loads in browsers as in Node. Errors are the binding's
 * own (`moduleError`), so that callers see one error type per module.
 */

/** Compiled module bytes, or a compiled `WebAssembly.Module`. */
export type WasmSource = ArrayBuffer | ArrayBufferView | object;

export interface WasmImportDescriptor {
  module: string;
  name: string;
  kind: string;
}

export interface WasmInstance {
  exports: Record<string, unknown>;
}

export interface WasmMemory {
  readonly buffer: ArrayBuffer;
}

export interface WasmApi {
  validate(bytes: ArrayBuffer | ArrayBufferView): boolean;
  compile(bytes: ArrayBuffer | ArrayBufferView): Promise<object>;
  instantiate(module: object, imports: object): Promise<WasmInstance>;
  instantiateStreaming?(source: unknown, imports: object): Promise<{ module: object; instance: WasmInstance }>;
  Module: { new (bytes: ArrayBuffer | ArrayBufferView): object; imports(module: object): WasmImportDescriptor[] };
  Instance: new (module: object, imports: object) => WasmInstance;
}

/** What a `fetch` response offers that the streaming loader uses. */
export interface WasmResponseLike {
  arrayBuffer(): Promise<ArrayBuffer>;
  clone?(): WasmResponseLike;
}

/** The binding's error for a module that cannot be loaded (its 'module' code). */
export type ModuleError = (message: string) => Error;

/** The imports to instantiate with, from what the compiled module declares it imports. */
export type ImportsFor = (declared: WasmImportDescriptor[]) => object;

/** The engine's WebAssembly API, undefined where there is none. */
export function webAssembly(): WasmApi | undefined {
  return (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
}

/** The engine's WebAssembly API; the binding's error where there is none. */
export function requireWebAssembly(moduleError: ModuleError): WasmApi {
  const api = webAssembly();
  if (!api) throw moduleError('WebAssembly is not available in this environment');
  return api;
}

const isBytes = (source: WasmSource): source is ArrayBuffer | ArrayBufferView =>
  source instanceof ArrayBuffer || ArrayBuffer.isView(source);

/** Compiles bytes (or takes a compiled module) and instantiates it with the imports it declares. */
export async function instantiateWasm(
  source: WasmSource,
  importsFor: ImportsFor,
  moduleError: ModuleError,
): Promise<WasmInstance> {
  const api = requireWebAssembly(moduleError);
  const module = isBytes(source) ? await api.compile(source) : source;
  return api.instantiate(module, importsFor(api.Module.imports(module)));
}

/** Synchronous variant (Node, workers; browsers limit synchronous compilation on the main thread). */
export function instantiateWasmSync(
  source: WasmSource,
  importsFor: ImportsFor,
  moduleError: ModuleError,
): WasmInstance {
  const api = requireWebAssembly(moduleError);
  const module = isBytes(source) ? new api.Module(source) : source;
  return new api.Instance(module, importsFor(api.Module.imports(module)));
}

/**
 * Instantiates from a `fetch` response (or a promise of one), compiling while it downloads with
 * `WebAssembly.instantiateStreaming` when available (the server must send
 * `Content-Type: application/wasm`), else from the whole body.
 */
export async function instantiateWasmStreaming(
  response: WasmResponseLike | PromiseLike<WasmResponseLike>,
  imports: object,
  moduleError: ModuleError,
): Promise<WasmInstance> {
  const api = requireWebAssembly(moduleError);
  const resolved = await response;
  if (api.instantiateStreaming) {
    // Streaming consumes the body: keep a copy for the fallback (wrong MIME type and the like).
    const backup = resolved.clone?.();
    try {
      return (await api.instantiateStreaming(resolved, imports)).instance;
    } catch (e) {
      if (!backup) throw e;
      return instantiateWasm(await backup.arrayBuffer(), () => imports, moduleError);
    }
  }
  return instantiateWasm(await resolved.arrayBuffer(), () => imports, moduleError);
}

/** The names of `functions` the instance does not export as functions, and 'memory' if it has none. */
export function missingExports(wasmExports: Record<string, unknown>, functions: readonly string[]): string[] {
  const missing = functions.filter((name) => typeof wasmExports[name] !== 'function');
  const { memory } = wasmExports;
  if (!(memory && typeof memory === 'object' && 'buffer' in memory)) missing.push('memory');
  return missing;
}

/**
 * A module instance's linear memory as bytes. Bindings extend it so that the per-call `heap()`
 * stays one method on the module: the view is kept until memory growth detaches its buffer.
 */
export class LinearMemory {
  private view: Uint8Array;

  constructor(private readonly memory: WasmMemory) {
    this.view = new Uint8Array(memory.buffer);
  }

  /** The whole linear memory; re-created when memory grew (the old buffer is then detached). */
  heap(): Uint8Array {
    const buffer = this.memory.buffer;
    if (this.view.buffer !== buffer) this.view = new Uint8Array(buffer);
    return this.view;
  }

  /** Size of the linear memory in bytes (it only grows). */
  memoryBytes(): number {
    return this.memory.buffer.byteLength;
  }
}
