/**
 * The compiled build (`npm run build`) finds our workspaces' JavaScript through the
 * `mutp-compiled` export condition, which node must be given: the `mutp-origo` bin's shebang does
 * (`node --conditions=mutp-compiled`). Run as plain `node origo/dist/main.js`, node would load
 * the TypeScript sources and stop on a SyntaxError; this says what to run instead. main.ts
 * imports it first; from source (tsx, ts-jest) it does nothing.
 */
if (__filename.endsWith('.js') && require.resolve('@mutp/shared').endsWith('.ts')) {
  console.error(
    'origo: run the compiled build as `mutp-origo` (node_modules/.bin) or `node --conditions=mutp-compiled origo/dist/main.js`',
  );
  process.exit(1);
}

export {};
