#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=131072 node --max-semi-space-size=2 --optimize-for-size --enable-source-maps --conditions=mutp-compiled
/* global require, __dirname, console, process -- plain CommonJS, run by node as it is */
/* eslint-disable @typescript-eslint/no-require-imports */
// The `mutp` bin: npm links a bin at install time only if its file exists, and client/dist/ is made
// later by `npm run build`, so the bin is this committed file, which loads the compiled client.
// Its #! line keeps a long download's memory flat (bench:cli-large): a fixed malloc mmap threshold
// hands each freed range buffer back to the system (glibc's sliding threshold otherwise moves
// them into the heap, where fragments pile up over hundreds of ranges), and a small young
// generation lets the per-packet garbage die in 2 MiB instead of 16. --optimize-for-size (V8:
// "favor memory size over execution speed") collects the old generation sooner: the per-packet
// objects that outlive a scavenge piled up to 60-65 MiB of heap between major collections, 25-27
// MiB with it, for about a tenth more CPU (bench:cli-pipeline --compiled, issue 32).
const entry = require('node:path').join(__dirname, '..', 'dist', 'cli.js');
if (!require('node:fs').existsSync(entry)) {
  console.error(`mutp: ${entry} is missing: run \`npm run build\` first (docs/deploy.md)`);
  process.exit(1);
}
require(entry);
