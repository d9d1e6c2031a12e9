/** The loader both WebAssembly bindings share: instantiation, the exports check, the memory view. */
import {
  instantiateWasm,
  instantiateWasmStreaming,
  instantiateWasmSync,
  LinearMemory,
  missingExports,
  requireWebAssembly,
  WasmImportDescriptor,
  WasmMemory,
} from '../src/wasm-loader';

/** (module (import "env" "f" (func))), assembled by hand. */
const IMPORTING_MODULE = Uint8Array.from([
  ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // "\0asm", version 1
  ...[0x01, 0x04, 0x01, 0x60, 0x00, 0x00], // type section: 1 type, func () -> ()
  ...[0x02, 0x09, 0x01, 0x03, 0x65, 0x6e, 0x76, 0x01, 0x66, 0x00, 0x00], // import section: env.f, type 0
]);

const moduleError = (message: string) => new Error(`module: ${message}`);

/** The project's TypeScript lib has no WebAssembly types: the part of the API these tests use. */
const engine = globalThis as unknown as {
  WebAssembly?: { Memory: new (descriptor: { initial: number }) => WasmMemory & { grow(pages: number): number } };
};
const newMemory = () => new engine.WebAssembly!.Memory({ initial: 1 });

describe('wasm-loader', () => {
  test('instantiates bytes and compiled modules with the imports the module declares', async () => {
    const declared: WasmImportDescriptor[][] = [];
    const importsFor = (d: WasmImportDescriptor[]) => {
      declared.push(d);
      return { env: { f: () => {} } };
    };
    expect((await instantiateWasm(IMPORTING_MODULE, importsFor, moduleError)).exports).toEqual({});
    expect(instantiateWasmSync(IMPORTING_MODULE, importsFor, moduleError).exports).toEqual({});
    const compiled = new (requireWebAssembly(moduleError).Module)(IMPORTING_MODULE);
    expect(instantiateWasmSync(compiled, importsFor, moduleError).exports).toEqual({});
    expect(declared).toEqual(Array(3).fill([{ module: 'env', name: 'f', kind: 'function' }]));
  });

  test('streams from a response, and falls back to its body when streaming refuses it', async () => {
    const imports = { env: { f: () => {} } };
    const response = (type: string) => new Response(IMPORTING_MODULE, { headers: { 'Content-Type': type } });
    expect((await instantiateWasmStreaming(response('application/wasm'), imports, moduleError)).exports).toEqual({});
    const wrongType = Promise.resolve(response('text/plain'));
    expect((await instantiateWasmStreaming(wrongType, imports, moduleError)).exports).toEqual({});
  });

  test("reports the binding's error where WebAssembly is missing", () => {
    const saved = engine.WebAssembly;
    try {
      engine.WebAssembly = undefined;
      expect(() => requireWebAssembly(moduleError)).toThrow('module: WebAssembly is not available');
    } finally {
      engine.WebAssembly = saved;
    }
  });

  test('names the functions missing and a missing memory', () => {
    const memory = newMemory();
    expect(missingExports({ f: () => 0, g: 1, memory }, ['f', 'g', 'h'])).toEqual(['g', 'h']);
    expect(missingExports({ f: () => 0 }, ['f'])).toEqual(['memory']);
  });

  test('the memory view lasts until memory grows', () => {
    const memory = newMemory();
    const linear = new LinearMemory(memory);
    const before = linear.heap();
    expect(linear.heap()).toBe(before);
    expect(linear.memoryBytes()).toBe(65536);
    memory.grow(1);
    const after = linear.heap();
    expect(after).not.toBe(before);
    expect(after.length).toBe(2 * 65536);
    expect(linear.memoryBytes()).toBe(2 * 65536);
  });
});
