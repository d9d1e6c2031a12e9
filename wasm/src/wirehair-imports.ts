/**
 * The imports of the wirehair module (wirehair.ts loads it): stubs for what Rust's standard
 * library and emscripten link in, the memory it writes to once instantiated.
 */
import type { ModuleError, WasmImportDescriptor, WasmMemory } from './wasm-loader';

const WASI_ENOSYS = 52;

/**
 * Stubs for what the module imports: emscripten's memory-growth notification, and the few WASI
 * calls Rust's standard library links in for its panic path (print to stderr, read the
 * environment, exit). Only names the module actually imports are provided; anything else is an
 * error at load time.
 */
export class ImportEnv {
  memory?: WasmMemory;
  private line = '';

  constructor(private readonly moduleError: ModuleError) {}

  build(imports: WasmImportDescriptor[]): Record<string, Record<string, unknown>> {
    const stubs: Record<string, Record<string, unknown>> = {
      env: {
        // Views are re-created lazily when memory.buffer changes.
        emscripten_notify_memory_growth: () => {},
        __syscall_getcwd: () => -WASI_ENOSYS,
      },
      wasi_snapshot_preview1: {
        fd_write: (fd: number, iovs: number, iovsLen: number, nwritten: number) =>
          this.fdWrite(fd, iovs, iovsLen, nwritten),
        environ_sizes_get: (count: number, size: number) => this.writeU32s([count, 0], [size, 0]),
        environ_get: () => 0,
        proc_exit: (code: number) => {
          throw this.moduleError(`the wirehair module aborted (exit ${code})`);
        },
      },
    };
    const result: Record<string, Record<string, unknown>> = {};
    for (const { module, name, kind } of imports) {
      const stub = stubs[module]?.[name];
      if (kind !== 'function' || stub === undefined) {
        throw this.moduleError(`unexpected import ${module}.${name} (${kind}): rebuild the module`);
      }
      (result[module] ??= {})[name] = stub;
    }
    return result;
  }

  private view(): DataView {
    if (!this.memory) throw this.moduleError('memory accessed before instantiation');
    return new DataView(this.memory.buffer);
  }

  private writeU32s(...entries: [number, number][]): number {
    const view = this.view();
    for (const [ptr, value] of entries) view.setUint32(ptr >>> 0, value, true);
    return 0;
  }

  /** Forwards stdout/stderr (Rust panic messages) to console.error, line by line. */
  private fdWrite(fd: number, iovs: number, iovsLen: number, nwritten: number): number {
    const view = this.view();
    const bytes = new Uint8Array(view.buffer);
    let total = 0;
    for (let i = 0; i < iovsLen; i++) {
      const ptr = view.getUint32((iovs >>> 0) + i * 8, true);
      const len = view.getUint32((iovs >>> 0) + i * 8 + 4, true);
      if (fd === 1 || fd === 2) {
        for (let k = 0; k < len; k++) {
          const c = bytes[ptr + k];
          if (c === 10) {
            console.error(`[wirehair wasm] ${this.line}`);
            this.line = '';
          } else {
            this.line += String.fromCharCode(c);
          }
        }
      }
      total += len;
    }
    view.setUint32(nwritten >>> 0, total, true);
    return 0;
  }
}
