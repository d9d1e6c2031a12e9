/**
 * One MUTP download over live proxy links: drives the sans-IO Receiver with the host's clock,
 * sends its requests and feedback on each link, and resolves with the verified object.
 */
import {
  ByteRange,
  Codec,
  DeadlineTimer,
  decodeAssertionKey,
  Mode,
  ObjectAttributes,
  PollutionKind,
  Receiver,
  ReceiverConfig,
  SchedulerName,
  SourceSigner,
  SourceStats,
  TransferError,
  VerifySignature,
} from '..';
import { Capabilities, capabilitiesOf, Feature, hasFeature, LEGACY_CAPABILITIES, withoutFeatures } from '../wire';
import { ClientError } from './errors';
import type { ProxyInfo } from '../signalling';
import { Clock } from './host';
import { ProxyLink } from './proxy-link';

export interface DownloadOptions {
  url: string;
  mode: Mode;
  scheduler?: SchedulerName;
  window: number;
  generationSize: number;
  symbolSize: number;
  codec: Codec;
  transferId: number;
  /** Only these bytes of the resource (a ranged REQUEST). */
  range?: ByteRange;
  signal?: AbortSignal;
  receiverConfig?: Partial<ReceiverConfig>;
  /** The host's count of messages it dropped unread (ClientHost.receiveDrops), for the receiver. */
  receiveDrops?: () => number;
  sha256?: (data: Uint8Array) => Uint8Array;
  verifySignature?: VerifySignature;
  /**
   * Proxies the Receiver excluded as polluters (wrong META or DIGESTS, or data that failed a
   * verified unit), told once the download ends, whether it completed or failed.
   */
  onPolluters?: (polluters: { proxyId: string; kind: PollutionKind; reason: string }[]) => void;
  /**
   * The download failed because sources signed different identities: their signed METAs (one per
   * identity first), for origo to judge against the origin.
   */
  onConflict?: (statements: { proxyId: string; meta: Uint8Array }[]) => void;
  /** Progress, per datagram received. */
  onProgress?: (progress: DownloadProgress) => void;
  /**
   * Optional features this client leaves off, as a client one release behind (tests, rolling
   * upgrades; docs/protocol.md §13). Its proxies are sent none of them.
   */
  disabledFeatures?: readonly Feature[];
}

export interface DownloadProgress {
  /** DoF received / needed (0 before the object's length is known). */
  dof: number;
  totalDof: number;
  /** The object's length (0 before it is known). */
  bytes: number;
  /** Sources that can still serve, of `sources` asked. */
  liveSources: number;
  sources: number;
  /**
   * Each source's counters now (the CLI's per-proxy rates). A copy made when called: call it at
   * the rate a display is drawn, not per datagram.
   */
  sourceCounters?: () => { proxyId: string; name: string; bytes: number; state: SourceStats['state'] }[];
}

export interface SourceShare extends SourceStats {
  proxyId: string;
  name: string;
  /** What carried this source's link at the end ('webrtc', 'quic'; undefined: it was lost). */
  transport?: string;
  /** Share of all useful packets. */
  share: number;
}

export interface DownloadResult {
  object: Uint8Array;
  mode: Mode;
  startedAt: number;
  durationMs: number;
  goodputBps: number;
  normalizedGoodput: number;
  sources: SourceShare[];
  /** What the agreed sources said of the object: the origin's Content-Type, its place in the resource. */
  attributes?: ObjectAttributes;
}

/** How long a finished transfer still answers stray data with STOP. */
const STOP_LINGER_MS = 3000;
/**
 * Messages handled in one batch before the download answers them: half a FEEDBACK's reach of 32
 * packets, so a batch of one source (or a FEEDBACK lost on the way) never leaves delivered
 * packets unacknowledged.
 */
const FLUSH_EVERY_MESSAGES = 16;
export function runDownload(offered: ProxyLink[], clock: Clock, o: DownloadOptions): Promise<DownloadResult> {
  const startedAt = clock.now();
  const own = withoutFeatures(o.disabledFeatures);
  const usable = usableLinks(offered, own, o);
  if (typeof usable === 'string') return Promise.reject(new ClientError('no-proxies', usable));
  const links = usable;
  const receiver = new Receiver({
    transferId: o.transferId,
    url: o.url,
    mode: o.mode,
    scheduler: o.scheduler,
    sourceCount: links.length,
    window: o.window,
    generationSize: o.generationSize,
    symbolSize: o.symbolSize,
    codec: o.codec,
    now: startedAt,
    range: o.range,
    capacityHints: links.map((link) => link.proxy.capacityBps),
    config: o.receiverConfig,
    sha256: o.sha256,
    // A client without signatures is one from before them: it holds no keys (and is sent no signed META).
    signers: hasFeature(own, 'signatures') ? links.map((link) => signerOf(link.proxy)) : undefined,
    verifySignature: o.verifySignature,
    receiveDrops: o.receiveDrops,
    sourceNames: links.map((link) => link.proxy.name),
    capabilities: own,
    sourceCapabilities: links.map((link) => declaredBy(link.proxy)),
    // Agreeing sources must span operators (issue 31); an offer that names none means the proxy's id.
    sourceOperators: links.map((link) => link.proxy.operator ?? link.proxy.proxyId),
  });

  return new Promise<DownloadResult>((resolve, reject) => {
    let settled = false;

    let handledSinceFlush = 0;
    const flush = () => {
      handledSinceFlush = 0;
      const now = clock.now();
      for (let d = receiver.pollDatagram(now); d; d = receiver.pollDatagram(now)) links[d.source].send(d.bytes);
      if (settled) return;
      if (receiver.status !== 'active') return settle();
      timer.arm();
    };
    // A datagram's answer (feedback, a STOP) waits for the other datagrams that arrived with it:
    // a transport that hands over a batch at once (QUIC's addon) then costs one flush, and one
    // wake-up of its sending thread, per batch rather than per datagram (issue 33). But not for
    // more than FLUSH_EVERY_MESSAGES: one FEEDBACK acknowledges only the 32 packets below its
    // largest, and the source counts older unacknowledged ones lost (its window shrinks).
    let flushQueued = false;
    const flushAfterBatch = () => {
      if (++handledSinceFlush >= FLUSH_EVERY_MESSAGES) return flush();
      if (flushQueued) return;
      flushQueued = true;
      queueMicrotask(() => {
        flushQueued = false;
        flush();
      });
    };
    const timer = new DeadlineTimer(
      receiver,
      (at, fire) => clock.setTimer(Math.max(0, at - clock.now()), fire),
      () => clock.now(),
      flush,
    );

    const settle = () => {
      if (settled) return;
      settled = true;
      timer.stop();
      o.signal?.removeEventListener('abort', onAbort);
      // STOPs were flushed above. A lost STOP is repeated when that proxy's data keeps coming, so
      // the transfer stays attached for a while; the links stay open for the next download.
      clock.setTimer(STOP_LINGER_MS, () => links.forEach((link) => link.detach(o.transferId)), true);
      const sourceStats = receiver.stats().sources;
      links.forEach((link, i) => {
        if (!sourceStats[i].polluter) link.observe(sourceStats[i]);
      });
      const polluters = receiver.polluters();
      if (polluters.length > 0)
        o.onPolluters?.(
          polluters.map((p) => ({ proxyId: links[p.source].proxy.proxyId, kind: p.kind, reason: p.reason })),
        );
      const evidence = receiver.conflictEvidence();
      if (evidence.length > 0)
        o.onConflict?.(evidence.map((e) => ({ proxyId: links[e.source].proxy.proxyId, meta: e.meta })));
      if (receiver.status === 'complete') resolve(summarize(receiver, links, startedAt, clock.now(), o.mode));
      else reject(toClientError(receiver.error));
    };

    const onAbort = () => {
      receiver.cancel();
      flush();
    };
    if (o.signal?.aborted) {
      reject(new ClientError('cancelled', 'aborted before the download started'));
      return;
    }
    o.signal?.addEventListener('abort', onAbort);

    const sourceCounters = () =>
      receiver.stats().sources.map((s, i) => ({
        proxyId: links[i].proxy.proxyId,
        name: links[i].proxy.name,
        bytes: s.bytes,
        state: s.state,
      }));
    const lose = (index: number, reason: string) => {
      receiver.sourceLost(index, reason);
      flush();
    };
    // Each link routes this transfer's messages here, judges its own liveness and reconnects on
    // its own (LinkEndpoint): a source whose link came back is asked again and resumes.
    const attach = (index: number) => {
      const link = links[index];
      link.attach(o.transferId, {
        handleMessage: (message, size, now, arrivedAt) => {
          receiver.handleMessage(index, message, size, now, arrivedAt);
          // Per datagram: the cheap getters, not stats() (a copy of every source's counters).
          if (o.onProgress && !settled) {
            let liveSources = 0;
            for (let i = 0; i < links.length; i++) if (receiver.sourceLive(i)) liveSources++;
            const bytes = receiver.objectLength ?? 0;
            o.onProgress({ ...receiver.progress(), bytes, liveSources, sources: links.length, sourceCounters });
          }
          flushAfterBatch();
        },
        awaiting: () => !settled && receiver.sourceLive(index),
        reconnected: (now) => {
          if (settled) return;
          receiver.sourceReconnected(index, now);
          flush();
        },
        closed: (reason) => {
          if (!settled) lose(index, `connection to ${link.proxy.name} lost: ${reason}`);
        },
      });
    };
    links.forEach((link, index) => {
      attach(index);
      if (!link.alive) receiver.sourceLost(index, `connection to ${link.proxy.name} is not open`);
    });
    flush();
  });
}

function toClientError(error: TransferError | undefined): ClientError {
  if (!error) return new ClientError('download-failed', 'the transfer ended without an object');
  // A cancel is a cancel: not "cancelled: cancelled: ..." (the transfer's code is the client's here).
  return error.code === 'cancelled'
    ? new ClientError('cancelled', error.reason)
    : new ClientError('download-failed', error.message);
}

function summarize(receiver: Receiver, links: ProxyLink[], startedAt: number, now: number, mode: Mode): DownloadResult {
  const stats = receiver.stats();
  const attributes = receiver.attributes;
  const object = receiver.takeObject();
  const durationMs = Math.max(now - startedAt, 1e-3);
  let useful = 0;
  let received = 0;
  for (const s of stats.sources) {
    useful += s.useful;
    received += s.received - s.afterComplete;
  }
  return {
    object,
    mode,
    startedAt,
    durationMs,
    goodputBps: (object.length * 1000) / durationMs,
    normalizedGoodput: received > 0 ? useful / received : 1,
    sources: stats.sources.map((s, i) => ({
      ...s,
      proxyId: links[i].proxy.proxyId,
      name: links[i].proxy.name,
      transport: links[i].transportKind,
      share: useful > 0 ? s.useful / useful : 0,
    })),
    ...(attributes ? { attributes } : {}),
  };
}

/** The key origo published for a proxy, as the Receiver checks its META with (none: unsigned). */
function signerOf(proxy: ProxyInfo): SourceSigner | undefined {
  const publicKey = proxy.assertionKey === undefined ? undefined : decodeAssertionKey(proxy.assertionKey);
  return publicKey && { proxyId: proxy.proxyId, publicKey };
}

/** What a proxy declared it understands (none declared: undefined, the legacy set). */
function declaredBy(proxy: ProxyInfo): Capabilities | undefined {
  return proxy.capabilities && capabilitiesOf(proxy.capabilities);
}

/**
 * The links whose proxies can serve this request, or why none can (docs/protocol.md §13): a
 * ranged request needs `ranges` (without it a proxy would refuse the REQUEST, and a whole object
 * is not what was asked for: the caller falls back to HTTP), fountain needs `partitioned`, and a
 * proxy whose key the client holds must declare `signatures` (its unsigned META would never
 * count: integrity is never given up for a proxy's sake).
 */
function usableLinks(links: ProxyLink[], own: Capabilities, o: DownloadOptions): ProxyLink[] | string {
  if (o.range && !hasFeature(own, 'ranges'))
    return 'this client does not declare byte ranges (fetch the range over HTTP)';
  const reasons: string[] = [];
  const usable = links.filter((link) => {
    const declared = declaredBy(link.proxy) ?? LEGACY_CAPABILITIES;
    const both = own & declared;
    const problem =
      (o.range && !hasFeature(both, 'ranges') ? 'byte ranges' : undefined) ??
      (o.mode === 'fountain' && (o.scheduler ?? 'partitioned') === 'partitioned' && !hasFeature(both, 'partitioned')
        ? 'the partitioned scheduler fountain needs'
        : undefined) ??
      (hasFeature(own, 'signatures') && signerOf(link.proxy) && !hasFeature(declared, 'signatures')
        ? 'signed METAs (it has a published key)'
        : undefined);
    if (problem) reasons.push(`${link.proxy.name} does not declare ${problem}`);
    return problem === undefined;
  });
  if (usable.length > 0 || links.length === 0) return usable;
  return `none of the ${links.length} proxies can serve this request: ${reasons.join('; ')}`;
}
