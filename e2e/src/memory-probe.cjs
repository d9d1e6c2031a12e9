/* global require, process, setInterval -- plain CommonJS, preloaded by node's --require */
/* eslint-disable @typescript-eslint/no-require-imports */
// Preloaded into a `mutp` process by the benches (NODE_OPTIONS=--require ...memory-probe.cjs,
// MUTP_MEMORY_PROBE=<file>): each time the process's RSS reaches a new high, what node says about
// it then (V8 heap, array buffers, external) is written to the file, one JSON document, so a bench
// can tell which part of the peak is the JS side's. A 50 ms timer: it runs between the batches of
// messages node-datachannel hands the main thread, so a busy thread is sampled less often.
const file = process.env.MUTP_MEMORY_PROBE;
if (file) {
  const { writeFileSync } = require('node:fs');
  let highest = 0;
  let atPeak = {};
  const sample = () => {
    const m = process.memoryUsage();
    if (m.rss <= highest) return;
    highest = m.rss;
    const mib = (b) => Math.round((b / 1048576) * 10) / 10;
    atPeak = {
      rssMiB: mib(m.rss),
      heapUsedMiB: mib(m.heapUsed),
      heapTotalMiB: mib(m.heapTotal),
      arrayBuffersMiB: mib(m.arrayBuffers),
      externalMiB: mib(m.external),
      receive: receiveStats(),
    };
    writeFileSync(file, JSON.stringify(atPeak));
  };
  // node-rtc's counters of messages handed on and dropped per turn, once the client loaded it.
  const receiveStats = () => {
    try {
      return require('@mutp/node-rtc').nodeRtcReceiveStats();
    } catch {
      return undefined;
    }
  };
  setInterval(sample, 50).unref();
  // The receive counters of the whole run as well, when the process exits.
  process.on('exit', () => writeFileSync(file, JSON.stringify({ ...atPeak, receiveAtExit: receiveStats() })));
}
