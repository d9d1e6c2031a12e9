/**
 * `npm run bench:core -- [--json]`: datagrams per second through one Sender and one Receiver with
 * no network in between (feedback returns at once), per mode, on one core. The baseline, measured
 * in the same run, is copying the same bytes once (Uint8Array.set). Includes the SHA-256 check at
 * completion (node:crypto, as a Node host passes it).
 */
import { createHash } from 'node:crypto';
import { Codec, decode, MessageType, Mode, Receiver, rlncCodec, seededRandom, Sender, uncodedCodec } from '../src';

const json = process.argv.includes('--json');
const nodeSha256 = (data: Uint8Array) => new Uint8Array(createHash('sha256').update(data).digest());
const TARGET_UNCODED_MBPS = 100;

function makeObject(bytes: number): Uint8Array {
  const object = new Uint8Array(bytes);
  const random = seededRandom(7);
  const words = new Uint32Array(object.buffer, 0, bytes >>> 2);
  for (let i = 0; i < words.length; i++) words[i] = random();
  return object;
}

interface Run {
  seconds: number;
  datagrams: number;
  bytes: number;
}

function transfer(mode: Mode, codec: Codec, object: Uint8Array, digest: Uint8Array): Run {
  let now = 0;
  const receiver = new Receiver({
    transferId: 1,
    url: 'bench://object',
    mode,
    sourceCount: 1,
    window: 240,
    generationSize: 24,
    symbolSize: 1120,
    codec,
    now,
    sha256: nodeSha256,
  });
  let sender: Sender | undefined;
  let datagrams = 0;
  let bytes = 0;
  const started = process.hrtime.bigint();
  while (receiver.status === 'active') {
    for (let out = receiver.pollDatagram(now); out; out = receiver.pollDatagram(now)) {
      if (!sender) {
        const request = decode(out.bytes);
        if (!request.ok || request.value.type !== MessageType.Request) throw new Error('expected a REQUEST first');
        sender = new Sender({ request: request.value, object, digest, codec, random: seededRandom(1), now });
      } else {
        sender.handleDatagram(out.bytes, now);
      }
    }
    const d = sender?.pollDatagram(now);
    if (d) {
      receiver.handleDatagram(0, d, now);
      datagrams++;
      bytes += d.length;
      now += 0.001; // 1 µs per datagram: ~1 GB/s of simulated link
    } else {
      now += 1;
      sender?.handleTimeout(now);
      receiver.handleTimeout(now);
    }
  }
  if (receiver.status !== 'complete') throw new Error(`transfer failed: ${receiver.error?.message}`);
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, datagrams, bytes };
}

function memcpyMBps(object: Uint8Array): number {
  const target = new Uint8Array(object.length);
  const rounds = 20;
  const started = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) {
    target.set(object);
    target[i] ^= 1;
  }
  return (object.length * rounds) / 1e6 / (Number(process.hrtime.bigint() - started) / 1e9);
}

function best(runs: number, f: () => Run): Run {
  let fastest: Run | undefined;
  for (let i = 0; i < runs; i++) {
    const r = f();
    if (!fastest || r.seconds < fastest.seconds) fastest = r;
  }
  return fastest!;
}

const rows = [];
for (const [mode, codec, objectBytes] of [
  ['uncoded', uncodedCodec, 32 << 20],
  ['rlnc', rlncCodec, 8 << 20],
] as const) {
  const object = makeObject(objectBytes);
  const digest = nodeSha256(object);
  transfer(mode, codec, object, digest); // warm-up (JIT)
  const run = best(3, () => transfer(mode, codec, object, digest));
  const baseline = memcpyMBps(object);
  const objectMBps = objectBytes / 1e6 / run.seconds;
  rows.push({
    mode,
    codec: codec.name,
    objectBytes,
    datagrams: run.datagrams,
    datagramsPerSecond: Math.round(run.datagrams / run.seconds),
    objectMBps: Math.round(objectMBps * 10) / 10,
    memcpyMBps: Math.round(baseline),
    vsMemcpy: Number((objectMBps / baseline).toPrecision(3)),
    ...(mode === 'uncoded' ? { targetMBps: TARGET_UNCODED_MBPS, meetsTarget: objectMBps >= TARGET_UNCODED_MBPS } : {}),
  });
}

for (const r of rows) {
  console.log(
    `${r.mode.padEnd(8)} ${r.codec.padEnd(8)} ${String(r.datagrams).padStart(6)} datagrams  ` +
      `${String(r.datagramsPerSecond).padStart(7)} datagrams/s  ${String(r.objectMBps).padStart(6)} MB/s of object  ` +
      `(${r.vsMemcpy} x memcpy at ${r.memcpyMBps} MB/s)`,
  );
}
if (json) console.log(JSON.stringify(rows));
