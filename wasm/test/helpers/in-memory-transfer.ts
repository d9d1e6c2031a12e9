/**
 * Real Senders and one Receiver wired through a deterministic in-memory network: a fixed one-way
 * delay per source, no loss, at most four datagrams per source per simulated millisecond. A
 * source is created from the first REQUEST that reaches it, as a proxy's endpoint does. Shared by
 * the integrity tests (hostile sources) and the resume tests (a source that starts over).
 */
import { createHash } from 'node:crypto';
import {
  Codec,
  decode,
  DEFAULT_GENERATION_SIZE,
  DEFAULT_SYMBOL_SIZE,
  DEFAULT_WINDOW,
  MessageType,
  Mode,
  Receiver,
  ReceiverConfig,
  RequestMessage,
  seededRandom,
  MetaSigner,
  Sender,
  SourceSigner,
} from '@mutp/shared/internal';

export const TRANSFER = 0x1a7e0001;
export const SYMBOL = 256;
export const G = 8;

/** A transfer's layout as the client asks for it. */
export interface TransferLayout {
  symbolSize: number;
  generationSize: number;
  window: number;
}

/** Small units: quick tests that still cross many check units. */
export const SMALL_LAYOUT: TransferLayout = { symbolSize: SYMBOL, generationSize: G, window: 64 };
/** What clients ask for in production (DEFAULT_SYMBOL_SIZE, DEFAULT_GENERATION_SIZE, DEFAULT_WINDOW). */
export const PRODUCTION_LAYOUT: TransferLayout = {
  symbolSize: DEFAULT_SYMBOL_SIZE,
  generationSize: DEFAULT_GENERATION_SIZE,
  window: DEFAULT_WINDOW,
};

export const sha256 = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());

export function makeObject(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  return Uint8Array.from({ length }, () => random() & 0xff);
}

/** A source as the network sees it: takes client datagrams, yields datagrams to send. */
export interface Source {
  handle(bytes: Uint8Array, now: number): void;
  poll(now: number): Uint8Array | null;
  tick(now: number): void;
}

export function honest(
  codec: Codec,
  object: Uint8Array,
  request: RequestMessage,
  seed: number,
  signer?: MetaSigner,
): Sender {
  return new Sender({
    ...(signer ? { signer } : {}),
    request,
    object,
    digest: sha256(object),
    codec,
    random: seededRandom(seed),
    now: 0,
    sha256,
  });
}

export function asSource(sender: Sender): Source {
  return {
    handle: (b, now) => sender.handleDatagram(b, now),
    poll: (now) => sender.pollDatagram(now),
    tick: (now) => {
      const d = sender.nextDeadline();
      if (d !== null && d <= now) sender.handleTimeout(now);
    },
  };
}

/** What a test may do to the network between two simulated milliseconds. */
export interface NetworkControl {
  receiver: Receiver;
  /**
   * Source `i` loses the transfer (its connection went, its endpoint dropped the transfer):
   * what is in flight to and from it is lost, the client connects anew (sourceReconnected) and
   * its next REQUEST creates a new source through `make`.
   */
  restart(i: number, now: number): void;
}

export interface Run {
  receiver: Receiver;
  object: Uint8Array;
}

export interface NetworkHooks {
  /** Runs every simulated millisecond, before the receiver's timers and output. */
  step?: (now: number, control: NetworkControl) => void;
  /** A datagram of source `from` reaches the receiver. */
  delivered?: (from: number, bytes: Uint8Array) => void;
}

/**
 * Runs a download: `sources[i]` is reached with a one-way delay of delays[i] ms. Returns when the
 * receiver is done (throws after 60 s of simulated time).
 */
export function download(
  mode: Mode,
  codec: Codec,
  object: Uint8Array,
  make: (request: RequestMessage, i: number) => Source,
  delays: number[],
  hooks: NetworkHooks = {},
  layout: TransferLayout = SMALL_LAYOUT,
  /** Per source, the key the client holds for it (signed METAs); none: unsigned sources. */
  signers?: readonly (SourceSigner | undefined)[],
  config?: Partial<ReceiverConfig>,
): Run {
  const n = delays.length;
  const receiver = new Receiver({
    ...(signers ? { signers } : {}),
    ...(config ? { config } : {}),
    transferId: TRANSFER,
    url: 'https://origin.example/seg',
    mode,
    sourceCount: n,
    window: layout.window,
    generationSize: layout.generationSize,
    symbolSize: layout.symbolSize,
    codec,
    now: 0,
    sha256,
  });
  const sources: (Source | undefined)[] = new Array(n);
  // In flight: [deliverAt, to (-1 = receiver, else source), from, bytes]
  let queue: [number, number, number, Uint8Array][] = [];
  const control: NetworkControl = {
    receiver,
    restart(i, now) {
      sources[i] = undefined;
      queue = queue.filter(([, to, from]) => to !== i && !(to < 0 && from === i));
      receiver.sourceReconnected(i, now);
    },
  };
  for (let now = 0; now < 60_000; now++) {
    const due = queue.filter((q) => q[0] <= now);
    queue = queue.filter((q) => q[0] > now);
    for (const [, to, from, bytes] of due) {
      if (to < 0) {
        hooks.delivered?.(from, bytes);
        receiver.handleDatagram(from, bytes, now);
      } else {
        if (!sources[to]) {
          const m = decode(bytes);
          if (m.ok && m.value.type === MessageType.Request) sources[to] = make(m.value, to);
        }
        sources[to]?.handle(bytes, now);
      }
    }
    hooks.step?.(now, control);
    const deadline = receiver.nextDeadline();
    if (deadline !== null && deadline <= now) receiver.handleTimeout(now);
    for (let d = receiver.pollDatagram(now); d; d = receiver.pollDatagram(now))
      queue.push([now + delays[d.source], d.source, -1, d.bytes]);
    if (receiver.status !== 'active') return { receiver, object };
    sources.forEach((s, i) => {
      if (!s) return;
      s.tick(now);
      for (let k = 0; k < 4; k++) {
        const b = s.poll(now);
        if (!b) break;
        queue.push([now + delays[i], -1, i, b]);
      }
    });
  }
  throw new Error(`download did not end in 60 s of simulated time: ${JSON.stringify(receiver.stats().sources)}`);
}
