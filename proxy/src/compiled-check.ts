/**
 * The compiled build (`npm run build`) finds our workspaces' JavaScript through the
 * `mutp-compiled` export condition, which node must be given: the `mutp-proxy` bin's shebang does
 * (`node --conditions=mutp-compiled`). Run as plain `node proxy/dist/main.js`, node would load
 * the TypeScript sources and stop on a SyntaxError; this says what to run instead. main.ts
 * imports it first; from source (tsx, ts-jest) it does nothing.
 */
if (__filename.endsWith('.js') && require.resolve('@mutp/shared').endsWith('.ts')) {
  console.error(
    'proxy: run the compiled build as `mutp-proxy` (node_modules/.bin) or `node --conditions=mutp-compiled proxy/dist/main.js`',
  );
  process.exit(1);
}

export {};
