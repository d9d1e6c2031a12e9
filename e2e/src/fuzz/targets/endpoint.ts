/**
 * The source endpoint (`shared/src/endpoint/source-endpoint.ts`), the proxy's half for one client
 * peer, driven by a hostile client: sequences of REQUESTs (valid, mutated, for tiny and odd
 * layouts), FEEDBACK and STOP for the transfers it opened or never opened, raw bytes, objects
 * arriving or failing at any time, time passing, datagrams pulled, the peer closed. A crash is an
 * exception out of any endpoint call, a datagram it sends that does not decode, a memory budget
 * overdrawn, or anything still charged after the peer is closed.
 */
import fc from 'fast-check';
import { sha256 } from '@noble/hashes/sha256';
import {
  Admission,
  Codec,
  decode,
  Message,
  MessageType,
  MIN_SYMBOL_SIZE,
  Mode,
  rlncCodec,
  seededRandom,
  SharedEncoders,
  SourceEndpoint,
  uncodedCodec,
} from '@mutp/shared/internal';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { FuzzTarget, invariant, jsonBytes, mutated, rawBytes } from '../target';
import { encodeOrEmpty, validMessage } from './wire';

/** Transfer ids the client uses: few, so its messages meet the transfers they name. */
const TRANSFER_IDS = [1, 2, 3, 0xffffffff];
const OBJECT_SIZES = [0, 1, 255, 1120, 4097, 30_000];
const MEMORY_BYTES = 4 << 20;

type Step =
  | { kind: 'datagram'; bytes: Uint8Array }
  | { kind: 'ready'; pick: number; size: number; seed: number }
  | { kind: 'fail'; pick: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'poll'; count: number }
  | { kind: 'close' };

const request = fc
  .record({
    transferId: fc.constantFrom(...TRANSFER_IDS),
    mode: fc.constantFrom<Mode>('uncoded', 'rlnc', 'fountain'),
    scheduler: fc.constantFrom('random' as const, 'rarest' as const, 'partitioned' as const),
    sourceCount: fc.integer({ min: 1, max: 4 }),
    sourceIndex: fc.nat(3),
    window: fc.oneof(fc.integer({ min: 1, max: 64 }), fc.constantFrom(240, 8192)),
    generationSize: fc.oneof(fc.integer({ min: 1, max: 32 }), fc.constantFrom(64, 255)),
    symbolSize: fc.oneof(fc.constantFrom(MIN_SYMBOL_SIZE, 16, 255, 256, 1120), fc.integer({ min: 1, max: 1400 })),
    url: fc.constantFrom('https://cdn.example/a.ts', 'https://cdn.example/b.ts', ''),
  })
  .map((r) => ({ ...r, type: MessageType.Request, sourceIndex: r.sourceIndex % r.sourceCount }) as Message);

/** Any message of the wire format, about one of the client's transfers. */
const aboutMyTransfers = fc
  .tuple(validMessage, fc.constantFrom(...TRANSFER_IDS))
  .map(([m, transferId]) => ({ ...m, transferId }) as Message);

const datagram = fc.oneof(
  { weight: 4, arbitrary: request.map(encodeOrEmpty) },
  { weight: 4, arbitrary: aboutMyTransfers.map(encodeOrEmpty) },
  { weight: 3, arbitrary: mutated(fc.oneof(request, aboutMyTransfers).map(encodeOrEmpty)) },
  { weight: 1, arbitrary: rawBytes(64) },
);

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: datagram.map((bytes) => ({ kind: 'datagram' as const, bytes })) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('ready' as const),
      pick: fc.nat(7),
      size: fc.constantFrom(...OBJECT_SIZES),
      seed: fc.nat(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fail' as const), pick: fc.nat(7) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('advance' as const),
      ms: fc.oneof(fc.integer({ min: 0, max: 50 }), fc.constantFrom(1000, 6000, 31_000)),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('poll' as const), count: fc.integer({ min: 1, max: 40 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'close' as const }) },
);

let codecs: Record<Mode, Codec> | undefined;

function objectOf(size: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = random() & 0xff;
  return bytes;
}

function checkSent(bytes: Uint8Array, what: string): void {
  const decoded = decode(bytes);
  invariant(decoded.ok, `the endpoint sent a ${what} that does not decode: ${decoded.ok ? '' : decoded.error.message}`);
}

export const endpointTarget: FuzzTarget<Step[]> = {
  name: 'endpoint',
  about: "the proxy's source endpoint for one hostile client peer (shared/src/endpoint)",
  inputs: fc.array(step, { minLength: 1, maxLength: 40 }),
  async setup() {
    // The fountain codec is wirehair's WebAssembly; the TypeScript codecs serve the other modes.
    codecs = { ...(await loadNodeCodecs()), rlnc: rlncCodec, uncoded: uncodedCodec };
  },
  check(steps) {
    const admission = new Admission({ maxTransfers: 8, maxPerClient: 3, memoryBytes: MEMORY_BYTES });
    let now = 0;
    const ep = new SourceEndpoint({
      clientKey: 'fuzz',
      codecs: codecs ?? { rlnc: rlncCodec, uncoded: uncodedCodec },
      admission,
      seed: () => 7,
      now,
      limits: { minSymbolSize: MIN_SYMBOL_SIZE },
    });
    /** Fetches asked for and not yet answered or cancelled, in order. */
    const fetches: number[] = [];
    const drain = () => {
      for (let e = ep.pollEvent(); e; e = ep.pollEvent()) {
        if (e.type === 'fetch') fetches.push(e.transferId);
        if (e.type === 'cancel-fetch' && fetches.includes(e.transferId)) {
          fetches.splice(fetches.indexOf(e.transferId), 1);
        }
      }
      for (let c = ep.pollControl(); c; c = ep.pollControl()) checkSent(c, 'control datagram');
      invariant(
        admission.memory.used <= MEMORY_BYTES,
        `memory budget overdrawn: ${admission.memory.used} > ${MEMORY_BYTES}`,
      );
    };
    for (const s of steps) {
      switch (s.kind) {
        case 'datagram':
          ep.handleDatagram(s.bytes, now);
          break;
        case 'ready':
        case 'fail': {
          if (fetches.length === 0) break;
          const [transferId] = fetches.splice(s.pick % fetches.length, 1);
          if (s.kind === 'fail') {
            ep.objectFailed(transferId, 2, 'origin said no', now);
            break;
          }
          const bytes = objectOf(s.size, s.seed);
          const encoders = new SharedEncoders(bytes, admission.memory);
          ep.objectReady(transferId, { bytes, digest: sha256(bytes), encoders, cached: true }, now);
          break;
        }
        case 'advance':
          now += s.ms;
          ep.handleTimeout(now);
          break;
        case 'poll':
          for (let i = 0; i < s.count; i++) {
            const d = ep.pollDatagram(now);
            if (!d) break;
            checkSent(d, 'datagram');
          }
          break;
        case 'close':
          ep.close(now);
          break;
      }
      drain();
      const deadline = ep.nextDeadline();
      invariant(deadline === null || Number.isFinite(deadline), `next deadline is ${deadline}`);
    }
    // Whatever the client did, closing the peer returns every byte and slot.
    ep.close(now);
    drain();
    invariant(admission.memory.used === 0, `${admission.memory.used} bytes still charged after close`);
    invariant(admission.activeTransfers === 0, `${admission.activeTransfers} transfer slots held after close`);
  },
  bytes: (steps) => jsonBytes(steps),
};
