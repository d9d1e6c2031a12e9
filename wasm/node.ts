// `@mutp/wasm/node`: the Node-only loaders (they read the modules from wasm/dist).
export * from './src/node';
