/*
 * wasm_runtime.c: WebAssembly builds only. Emscripten's sbrk reports memory growth through
 * emscripten_notify_memory_growth, normally a JavaScript import; defining it here (doing nothing)
 * leaves the standalone modules without any import. The JavaScript side re-creates its memory
 * views by checking memory.buffer identity instead.
 */
#include <stddef.h>

void emscripten_notify_memory_growth(size_t memory_index);

void emscripten_notify_memory_growth(size_t memory_index) { (void)memory_index; }
