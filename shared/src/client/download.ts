/**
 * One MUTP download over live proxy links: drives the sans-IO Receiver with the host's clock,
 * sends its requests and feedback on each link, and resolves with the verified object.
 */
import {
  ByteRange,
  Codec,
  DeadlineTimer,
  Mode,
  ObjectAttributes,
  PollutionKind,
  Receiver,
  ReceiverConfig,
  SchedulerName,
  SourceStats,
  TransferError,
} from '..';
import { ClientError } from './errors';
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
  sha256?: (data: Uint8Array) => Uint8Array;
  /**
   * Proxies the Receiver excluded as polluters (wrong META or DIGESTS, or data that failed a
   * verified unit), told once the download ends, whether it completed or failed.
   */
  onPolluters?: (polluters: { proxyId: string; kind: PollutionKind; reason: string }[]) => void;
  /**
   * A source's connection was lost mid-download: a new connection to the same proxy, or a
   * rejection when none could be made. Given, the download resumes on it (the Receiver asks that
   * source again and keeps what it decoded); absent, the source is lost for this download.
   */
  reconnect?: (lost: ProxyLink) => Promise<ProxyLink>;
  /**
   * Whether the network answers now (origo answers a ping): asked once per connection, for a
   * source not yet heard SILENT_LINK_MS after it was asked. No answer means the request went into a disconnection, and
   * its connection is made anew at once instead of after UNANSWERED_LINK_MS.
   */
  networkAnswers?: () => Promise<boolean>;
  /** Progress: DoF received / needed (0 before the object's length is known). */
  onProgress?: (progress: { dof: number; totalDof: number; bytes: number }) => void;
}

export interface SourceShare extends SourceStats {
  proxyId: string;
  name: string;
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
 * A source heard before and then silent this long on a link that still looks open: the link is
 * closed and made anew (with `reconnect`). After a disconnection a surviving SCTP association
 * may sit in retransmission back-off for many seconds more; a new connection is up in one round
 * trip of ICE and DTLS.
 */
export const SILENT_LINK_MS = 3000;
/**
 * A source never heard in the transfer gets this long from when it was first asked (on this
 * connection) before its connection is made anew: it may be fetching the object from the origin,
 * which a new connection withdraws, so this is well above a segment's origin fetch. It bounds
 * what a download that began just before a disconnection waits for a stuck association.
 */
export const UNANSWERED_LINK_MS = 10_000;

export function runDownload(links: ProxyLink[], clock: Clock, o: DownloadOptions): Promise<DownloadResult> {
  const startedAt = clock.now();
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
  });

  return new Promise<DownloadResult>((resolve, reject) => {
    let settled = false;

    const flush = () => {
      const now = clock.now();
      for (let d = receiver.pollDatagram(now); d; d = receiver.pollDatagram(now)) links[d.source].send(d.bytes);
      if (settled) return;
      if (receiver.status !== 'active') return settle();
      timer.arm();
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
      stopWatchdog();
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

    /** When each source's link last delivered a datagram of this transfer (-Infinity: not yet). */
    const lastHeard = links.map(() => -Infinity);
    /** When each source was first asked on its current connection. */
    const askedAt = links.map(() => startedAt);
    /** The network check under way for unanswered sources (one at a time). */
    let probing = false;
    /** When each source was last the subject of a network check (once per connection is enough). */
    const probedAt = links.map(() => -Infinity);
    let stopWatchdog = () => {};
    const watch = () => {
      stopWatchdog = clock.setTimer(SILENT_LINK_MS / 3, () => {
        if (settled) return;
        const now = clock.now();
        const sources = receiver.stats().sources;
        const waiting: ProxyLink[] = [];
        links.forEach((link, i) => {
          const live = sources[i].state === 'active' || sources[i].state === 'connecting';
          const heard = lastHeard[i] > -Infinity;
          const silent = heard ? now - lastHeard[i] > SILENT_LINK_MS : now - askedAt[i] > UNANSWERED_LINK_MS;
          if (live && link.alive && silent)
            link.close(heard ? `nothing for ${SILENT_LINK_MS} ms` : `no answer for ${UNANSWERED_LINK_MS} ms`);
          else if (live && link.alive && !heard && now - askedAt[i] > SILENT_LINK_MS && probedAt[i] < askedAt[i])
            waiting.push(link);
        });
        if (waiting.length > 0 && o.networkAnswers && !probing) {
          probing = true;
          for (const link of waiting) probedAt[links.indexOf(link)] = now;
          void o.networkAnswers().then((answers) => {
            probing = false;
            if (settled || answers) return;
            for (const link of waiting) {
              const i = links.indexOf(link);
              if (i >= 0 && link.alive && lastHeard[i] === -Infinity)
                link.close(`no answer for ${SILENT_LINK_MS} ms, and the network does not answer`);
            }
          });
        }
        watch();
      });
    };
    if (o.reconnect) watch();
    const lose = (index: number, reason: string) => {
      receiver.sourceLost(index, reason);
      flush();
    };
    /** Resume across a lost connection: the source goes on over a new one (the caller's reconnect). */
    const reattach = (index: number, lost: ProxyLink, reason: string) => {
      o.reconnect!(lost).then(
        (fresh) => {
          if (settled) return;
          links[index] = fresh;
          // The new connection gets its own time to answer before it is judged silent.
          if (lastHeard[index] > -Infinity) lastHeard[index] = clock.now();
          askedAt[index] = clock.now();
          attach(index);
          receiver.sourceReconnected(index, clock.now());
          flush();
        },
        (e: unknown) => {
          if (settled) return;
          const why = e instanceof Error ? e.message : String(e);
          lose(index, `connection to ${lost.proxy.name} lost: ${reason}; reconnecting failed: ${why}`);
        },
      );
    };
    const attach = (index: number) => {
      const link = links[index];
      link.attach(o.transferId, {
        onDatagram: (bytes) => {
          lastHeard[index] = clock.now();
          receiver.handleDatagram(index, bytes, lastHeard[index]);
          // Per datagram: the cheap getters, not stats() (a copy of every source's counters).
          if (o.onProgress && !settled) o.onProgress({ ...receiver.progress(), bytes: receiver.objectLength ?? 0 });
          flush();
        },
        onLinkClosed: (reason) => {
          if (settled || links[index] !== link) return;
          if (o.reconnect) reattach(index, link, reason);
          else lose(index, `connection to ${link.proxy.name} lost: ${reason}`);
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
  return new ClientError(error.code === 'cancelled' ? 'cancelled' : 'download-failed', error.message);
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
      share: useful > 0 ? s.useful / useful : 0,
    })),
    ...(attributes ? { attributes } : {}),
  };
}
