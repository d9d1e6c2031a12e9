#!/usr/bin/env -S node --enable-source-maps --conditions=mutp-compiled
/* global require, __dirname, console, process -- plain CommonJS, run by node as it is */
/* eslint-disable @typescript-eslint/no-require-imports */
// The `mutp-origo` bin: npm links a bin at install time only if its file exists, and origo/dist/ is made
// later by `npm run build`, so the bin is this committed file, which loads the compiled origo.
const entry = require('node:path').join(__dirname, '..', 'dist', 'main.js');
if (!require('node:fs').existsSync(entry)) {
  console.error(`mutp-origo: ${entry} is missing: run \`npm run build\` first (docs/deploy.md)`);
  process.exit(1);
}
require(entry);
