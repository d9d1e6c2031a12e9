#!/usr/bin/env -S node --enable-source-maps --conditions=mutp-compiled
/* global require, __dirname, console, process -- plain CommonJS, run by node as it is */
/* eslint-disable @typescript-eslint/no-require-imports */
// The `mutp` bin: npm links a bin at install time only if its file exists, and client/dist/ is made
// later by `npm run build`, so the bin is this committed file, which loads the compiled client.
const entry = require('node:path').join(__dirname, '..', 'dist', 'cli.js');
if (!require('node:fs').existsSync(entry)) {
  console.error(`mutp: ${entry} is missing: run \`npm run build\` first (docs/deploy.md)`);
  process.exit(1);
}
require(entry);
