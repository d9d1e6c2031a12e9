/**
 * Simulates one MUTP download with the real sans-IO core: N senders, one receiver, and between
 * them per-source links. Model (see README "Simulator"):
 * - source -> client: the proxy shapes its upload to its cap (serialisation at capKBps); it is
 *   asked for a datagram only while its send buffer holds less than two datagrams (late binding);
 *   then one-way delay rtt/2 + uniform jitter, Bernoulli loss, optional duplication;
 * - client -> source: one-way delay + jitter, loss, duplication; no bandwidth limit;
 * - the client's own downlink is not a bottleneck.
 * With `Scenario.paths` (and optionally `.access`) the emulated links of link.ts replace the
 * delay/jitter/loss part: a datagram, LINK_OVERHEAD_BYTES larger on the wire, crosses path i then
 * the access link towards the client (access then path i back), each link direction fed in time
 * order through the event queue; the source's shaping to its cap and duplication stay.
 */
import { createHash } from 'node:crypto';
import {
  Admission,
  AdmissionLimits,
  LayoutDigests,
  DeadlineTimer,
  Codec,
  EndpointLimits,
  MessageType,
  MIN_SYMBOL_SIZE,
  Mode,
  Random,
  Receiver,
  ReceiverConfig,
  rlncCodec,
  seededRandom,
  Sender,
  SenderConfig,
  SharedEncoders,
  LinkEndpoint,
  SourceEndpoint,
  uncodedCodec,
} from '@mutp/shared';
import { EventQueue } from './event-queue';
import { SimLink, SimLinkDirection, sumDrops } from './link';
import { makeObject } from './object';
import { LinkSpec } from './link-spec';
import { idealMs, KB, Scenario, SimResult } from './scenario';

const SEND_BUFFER_DATAGRAMS = 2;

/**
 * Bytes a data-channel message carries on the wire beyond its payload, approximately: IP (20) +
 * UDP (8) + DTLS 1.2 record with AES-GCM (~37) + SCTP common header and DATA chunk (12 + 16).
 */
export const LINK_OVERHEAD_BYTES = 92;

/** How datagrams travel between the client and source i. */
interface Network {
  toClient(source: number, bytes: number, now: number, deliver: (at: number) => void): void;
  toSource(source: number, bytes: number, now: number, deliver: (at: number) => void): void;
  drops(): SimResult['linkDrops'];
}

/** The original model: one-way delay rtt/2 + uniform jitter, Bernoulli loss, duplication. */
function abstractNetwork(s: Scenario, uniform: () => number): Network {
  const oneWay = s.rttMs / 2;
  const reverseLoss = s.reverseLoss ?? s.loss;
  const duplicate = s.duplicate ?? 0;
  const transmit = (loss: number, base: number, deliver: (at: number) => void) => {
    if (uniform() < loss) return;
    deliver(base + oneWay + uniform() * s.jitterMs);
    if (duplicate > 0 && uniform() < duplicate) deliver(base + oneWay + uniform() * s.jitterMs);
  };
  return {
    toClient: (_source, _bytes, now, deliver) => transmit(s.loss, now, deliver),
    toSource: (_source, _bytes, now, deliver) => transmit(reverseLoss, now, deliver),
    drops: () => undefined,
  };
}

/** Emulated links: path i and the shared access link, per packet (link.ts). */
function linkNetwork(s: Scenario, paths: SimLink[], queue: EventQueue, uniform: () => number): Network {
  const random = seededRandom(s.seed * 40503 + 29);
  const access = s.access ? new SimLink(s.access, random) : undefined;
  const duplicate = s.duplicate ?? 0;
  const all = access ? [...paths, access] : paths;
  /** Crosses `first`, then (at the intermediate time, so `second` sees arrivals in order) `second`. */
  const cross = (
    first: SimLinkDirection,
    second: SimLinkDirection | undefined,
    bytes: number,
    now: number,
    deliver: (at: number) => void,
  ) => {
    const wire = bytes + LINK_OVERHEAD_BYTES;
    const copies = duplicate > 0 && uniform() < duplicate ? 2 : 1;
    for (let c = 0; c < copies; c++) {
      const middle = first.send(now, wire);
      if (middle === undefined) continue;
      if (!second) deliver(middle);
      else
        queue.schedule(middle, () => {
          const at = second.send(middle, wire);
          if (at !== undefined) deliver(at);
        });
    }
  };
  return {
    toClient: (source, bytes, now, deliver) => cross(paths[source].down, access?.down, bytes, now, deliver),
    toSource: (source, bytes, now, deliver) =>
      access
        ? cross(access.up, paths[source].up, bytes, now, deliver)
        : cross(paths[source].up, undefined, bytes, now, deliver),
    drops: () => sumDrops(all.map((link) => link.drops())),
  };
}

export interface MutpSimOptions {
  senderConfig?: Partial<SenderConfig>;
  receiverConfig?: Partial<ReceiverConfig>;
  /** Called for every datagram a sender emits (tests use it to check the window rule). */
  onSenderDatagram?: (source: number, sender: Sender, datagram: Uint8Array) => void;
  /** Drop every feedback datagram for which this returns true (tests). */
  dropFeedback?: (source: number, index: number) => boolean;
  /** Reuse an object across runs (benchmarks); must be makeObject(objectBytes, seed). */
  object?: Uint8Array;
  /** Codecs by mode (the WebAssembly ones); uncoded and rlnc default to the TypeScript ones. */
  codecs?: CodecSet;
  /** Each source's admission (the proxy's limits); default: one transfer's worth, 1 GiB. */
  admission?: Partial<AdmissionLimits> | ((source: number) => Partial<AdmissionLimits>);
  endpointLimits?: Partial<EndpointLimits>;
  /**
   * Each source starts as on a connection that has just served a transfer (the benchmarks' warm
   * repeats): its path estimate is its cap and the path's propagation RTT (SourceEndpoint
   * rememberPath), so the first window is already sized. Default: a cold connection.
   */
  warmPath?: boolean;
}

export type CodecSet = Partial<Record<Mode, Codec>>;

export function codecFor(mode: Mode, codecs: CodecSet = {}): Codec {
  const codec = codecs[mode] ?? (mode === 'uncoded' ? uncodedCodec : mode === 'rlnc' ? rlncCodec : undefined);
  if (!codec)
    throw new Error(`mode ${mode} needs a codec from @mutp/wasm (loadNodeCodecs()), pass it in options.codecs`);
  return codec;
}

interface SimSource {
  index: number;
  bytesPerMs: number;
  /** The proxy's side: the same endpoint (routing, admission, refusals) the proxy runs. */
  endpoint: SourceEndpoint;
  admission: Admission;
  /** The transfer's Sender once started (kept after it ends, for its stats). */
  sender?: Sender;
  dead: boolean;
  busyUntil: number;
  bufferedDatagrams: number;
  /** The endpoint's deadline timer, on the event queue. */
  timer: DeadlineTimer;
  feedbackSeen: number;
}

const nodeSha256 = (data: Uint8Array) => new Uint8Array(createHash('sha256').update(data).digest());

export function simulateMutp(s: Scenario, options: MutpSimOptions = {}): SimResult {
  if (s.mode === 'http') throw new RangeError('use simulateHttp for http');
  const mode = s.mode;
  const codec = codecFor(mode, options.codecs);
  const object = options.object ?? makeObject(s.objectBytes, s.seed);
  const digest = nodeSha256(object);
  // One proxy fleet serving one object: its unit digests are computed once, as a proxy's cache does.
  const digests = new LayoutDigests(object, nodeSha256);
  const queue = new EventQueue();
  const net: Random = seededRandom(s.seed * 7919 + 17);
  const uniform = () => net() / 0x100000000;
  const network = s.paths ? linkNetwork(s, pathLinks(s, s.paths), queue, uniform) : abstractNetwork(s, uniform);
  const maxSimMs = s.maxSimMs ?? 120_000;

  const receiver = new Receiver({
    transferId: (s.seed * 2654435761) >>> 0,
    url: 'sim://object',
    mode,
    scheduler: s.scheduler,
    sourceCount: s.capsKBps.length,
    window: s.window,
    generationSize: s.generationSize,
    symbolSize: s.symbolSize,
    codec,
    now: 0,
    ...(s.capacityHints ? { capacityHints: s.capsKBps.map((c) => c * KB) } : {}),
    config: {
      ...(s.weightLevels === undefined ? {} : { weightLevels: s.weightLevels }),
      ...s.receiverConfig,
      ...options.receiverConfig,
    },
    sha256: nodeSha256,
  });
  let completedAt = -1;
  // The event queue cannot cancel: a timer replaced by an earlier one still fires, finds nothing due.
  const scheduleAt = (at: number, fire: () => void) => {
    queue.schedule(at, fire);
    return () => undefined;
  };
  const receiverTimer = new DeadlineTimer(
    receiver,
    scheduleAt,
    () => queue.now,
    (now) => {
      if (receiver.status !== 'active' && completedAt < 0) completedAt = now;
      flushClient(now);
    },
  );

  const sources: SimSource[] = s.capsKBps.map((cap, index) => {
    const { endpoint, admission } = sourceEndpoint(index);
    if (options.warmPath) endpoint.rememberPath({ rateBps: cap * KB, minRttMs: propagationRttMs(s, index) }, 0);
    const src: SimSource = {
      index,
      bytesPerMs: (cap * KB) / 1000,
      endpoint,
      admission,
      dead: false,
      busyUntil: 0,
      bufferedDatagrams: 0,
      timer: new DeadlineTimer(
        endpoint,
        scheduleAt,
        () => queue.now,
        (now) => {
          drainEndpoint(src, now);
          pumpSource(src, now);
        },
      ),
      feedbackSeen: 0,
    };
    return src;
  });
  for (const f of s.failures ?? []) {
    queue.schedule(f.atMs, () => {
      const src = sources[f.source];
      if (!src) return;
      src.dead = true;
      src.timer.stop();
    });
  }

  function sourceEndpoint(index: number): { endpoint: SourceEndpoint; admission: Admission } {
    const limits = typeof options.admission === 'function' ? options.admission(index) : options.admission;
    const admission = new Admission({ maxTransfers: 1, maxPerClient: 1, memoryBytes: 1 << 30, ...limits });
    const endpoint = new SourceEndpoint({
      clientKey: 'sim-client',
      codecs: { [mode]: codec },
      admission,
      seed: () => (s.seed * 31 + index) * 1000003,
      now: 0,
      senderConfig: { ...s.senderConfig, ...options.senderConfig },
      uploadCapBps: s.startAtCap ? s.capsKBps[index] * KB : undefined,
      sha256: nodeSha256,
      // The simulated proxy serves one client that never idles out within a run, and the
      // properties explore the protocol's whole symbol range (a proxy's policy is tighter).
      limits: { idleTimeoutMs: Infinity, minSymbolSize: MIN_SYMBOL_SIZE, ...options.endpointLimits },
    });
    return { endpoint, admission };
  }

  /** The source's object is at hand at once (the simulator models no origin fetch). */
  function drainEndpoint(src: SimSource, now: number): void {
    const { endpoint } = src;
    for (let e = endpoint.pollEvent(); e; e = endpoint.pollEvent()) {
      if (e.type === 'fetch') {
        const encoders = new SharedEncoders(object, src.admission.memory);
        endpoint.objectReady(e.transferId, { bytes: object, digest, encoders, digests, cached: true }, now);
      } else if (e.type === 'started') {
        src.sender = endpoint.sender(e.transferId);
      }
    }
    for (let d = endpoint.pollControl(); d; d = endpoint.pollControl()) {
      network.toClient(src.index, d.length, now, (at) => queue.schedule(at, () => clientReceive(src.index, d, at)));
    }
  }

  // ---- source side
  function pumpSource(src: SimSource, now: number): void {
    const sender = src.sender;
    if (!sender || src.dead) return;
    while (src.bufferedDatagrams < SEND_BUFFER_DATAGRAMS) {
      const datagram = src.endpoint.pollDatagram(now);
      if (!datagram) break;
      options.onSenderDatagram?.(src.index, sender, datagram);
      const start = Math.max(now, src.busyUntil);
      const done = start + datagram.length / src.bytesPerMs;
      src.busyUntil = done;
      src.bufferedDatagrams++;
      queue.schedule(done, () => {
        src.bufferedDatagrams--;
        network.toClient(src.index, datagram.length, done, (at) =>
          queue.schedule(at, () => clientReceive(src.index, datagram, at)),
        );
        pumpSource(src, done);
      });
    }
    src.timer.arm();
  }

  function sourceReceive(src: SimSource, datagram: Uint8Array, now: number): void {
    if (src.dead) return;
    src.endpoint.handleDatagram(datagram, now);
    drainEndpoint(src, now);
    pumpSource(src, now);
  }

  // ---- client side: one link endpoint per source, as the client keeps one per proxy. The
  // simulator models no transport handshakes, so links are neither judged dead nor replaced: a
  // silent source is the Receiver's to steer around, as over a link that comes back.
  const links = sources.map((src) => {
    const link = new LinkEndpoint({
      now: 0,
      liveness: { silentMs: Infinity, unansweredMs: Infinity },
      reconnection: { enabled: false },
    });
    link.attach(
      receiver.transferId,
      {
        handleMessage: (m, size, now) => receiver.handleMessage(src.index, m, size, now),
        awaiting: () => receiver.sourceLive(src.index),
        reconnected: (now) => receiver.sourceReconnected(src.index, now),
        closed: (reason) => receiver.sourceLost(src.index, reason),
      },
      0,
    );
    link.transportOpened(0);
    return link;
  });

  function clientReceive(source: number, datagram: Uint8Array, now: number): void {
    links[source].handleDatagram(datagram, now);
    if (receiver.status !== 'active' && completedAt < 0) completedAt = now;
    flushClient(now);
  }

  function flushClient(now: number): void {
    for (let out = receiver.pollDatagram(now); out; out = receiver.pollDatagram(now)) {
      const src = sources[out.source];
      const bytes = out.bytes;
      if (options.dropFeedback && bytes[1] !== MessageType.Request && bytes[1] !== MessageType.Stop) {
        if (options.dropFeedback(src.index, src.feedbackSeen++)) continue;
      }
      const link = links[src.index];
      link.send(bytes, now);
      for (let d = link.pollTransmit(); d; d = link.pollTransmit()) {
        const datagram = d;
        network.toSource(src.index, datagram.length, now, (at) =>
          queue.schedule(at, () => sourceReceive(src, datagram, at)),
        );
      }
    }
    receiverTimer.arm();
  }

  flushClient(0);
  // Run past completion until the sources have heard STOP, to count what they sent in vain.
  const sendersQuiet = () =>
    completedAt >= 0 && sources.every((src) => !src.sender || src.dead || src.sender.status !== 'active');
  queue.run(maxSimMs, () => sendersQuiet() || (completedAt >= 0 && queue.now > completedAt + 10_000));
  if (completedAt < 0) {
    receiver.cancel();
    completedAt = queue.now;
  }
  const linkDrops = network.drops();
  const result = summarize(s, receiver, sources, completedAt, object);
  return linkDrops ? { ...result, linkDrops } : result;
}

/** One link per source, each seeded from the scenario and its index (independent of the others). */
function pathLinks(s: Scenario, specs: LinkSpec[]): SimLink[] {
  if (specs.length !== s.capsKBps.length)
    throw new RangeError(`scenario has ${s.capsKBps.length} sources but ${specs.length} paths`);
  return specs.map((spec, i) => new SimLink(spec, seededRandom((s.seed * 65599 + i * 2147) >>> 0)));
}

function summarize(
  s: Scenario,
  receiver: Receiver,
  sources: SimSource[],
  completedAt: number,
  object: Uint8Array,
): SimResult {
  const stats = receiver.stats();
  const complete = receiver.status === 'complete';
  let useful = 0;
  let receivedBefore = 0;
  let sent = 0;
  for (let i = 0; i < sources.length; i++) {
    const r = stats.sources[i];
    useful += r.useful;
    receivedBefore += r.received - r.afterComplete;
    sent += sources[i].sender?.stats.dataSent ?? 0;
  }
  const totalDof = Math.ceil(s.objectBytes / s.symbolSize);
  const byteExact = complete && equalBytes(receiver.takeObject(), object);
  return {
    scenario: s,
    status: complete ? 'complete' : 'failed',
    error: receiver.error?.message,
    downloadMs: completedAt,
    goodputBps: complete ? (s.objectBytes * 1000) / completedAt : 0,
    efficiency: complete ? idealMs(s) / completedAt : 0,
    normalizedGoodput: receivedBefore > 0 ? useful / receivedBefore : 0,
    sentPerUseful: totalDof > 0 ? sent / totalDof : 1,
    wastedAfterCompletion: Math.max(0, sent - receivedBefore),
    byteExact,
    sources: sources.map((src, i) => {
      const r = stats.sources[i];
      return {
        capKBps: s.capsKBps[i],
        sent: src.sender?.stats.dataSent ?? 0,
        received: r.received - r.afterComplete,
        useful: r.useful,
        share: useful > 0 ? r.useful / useful : 0,
      };
    }),
  };
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Round-trip propagation between the client and source `index`: the links' base delays, or rttMs. */
function propagationRttMs(s: Scenario, index: number): number {
  const path = s.paths?.[index];
  if (!path) return s.rttMs;
  const access = s.access;
  return path.down.delayMs + path.up.delayMs + (access ? access.down.delayMs + access.up.delayMs : 0);
}
