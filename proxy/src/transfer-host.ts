/**
 * The I/O around one client peer's `SourceEndpoint` (the sans-IO core decides everything about
 * transfers: routing, admission, refusals, STOP, codec failures). This host owns the channels,
 * the pacing and the metrics: datagrams from either channel go to the endpoint; objects are
 * fetched when the endpoint asks and the fetch is withdrawn when it stops asking; sending is
 * late-binding (while the data channel holds less than a low-water mark and the proxy's token
 * bucket has tokens, the endpoint is polled for the next datagram); one timer follows the
 * endpoint's deadline. Nothing a client sends can crash it.
 */
import {
  Admission,
  type ByteRange,
  Codec,
  DATA_CHANNEL_LABEL,
  type DatagramChannel,
  DeadlineTimer,
  EndpointEvent,
  EndpointLimits,
  MAX_DATAGRAM_BYTES,
  type MetaSigner,
  Mode,
  type ScheduleAt,
  SenderConfig,
  shareKey,
  SourceEndpoint,
} from '@mutp/shared';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { asServeError, wireErrorCode } from './errors';
import { sha256 } from './object-cache';
import { ProxyMetrics } from './metrics';
import { ObjectProvider } from './object-source';
import { RateMeter } from './rate-meter';
import { HintLedger } from './hint-ledger';
import { Pacer } from './pacer';
import { TokenBucket } from './token-bucket';

/** What every transfer host of one proxy shares. */
export interface TransferServices {
  codecs: Partial<Record<Mode, Codec>>;
  objects: ObjectProvider;
  bucket: TokenBucket;
  admission: Admission;
  metrics: ProxyMetrics;
  meter: RateMeter;
  logger: Logger;
  /**
   * The one timer of every host waiting for upload tokens (proxy.ts makes one for the bucket);
   * without it each host has a Pacer of its own.
   */
  pacer?: Pacer;
  /** The pump sends while the data channel holds less than this (a few datagrams). */
  lowWaterBytes?: number;
  senderConfig?: Partial<SenderConfig>;
  endpointLimits?: Partial<EndpointLimits>;
  /** The proxy's upload capacity in bytes/s when configured (SourceEndpoint uploadCapBps). */
  uploadCapBps?: number;
  /** Completed transfers are credited to their network here: what its staging hints may cost. */
  hints?: HintLedger;
  /** Seeds of the per-transfer coefficient generators (default: crypto random). */
  seed?: () => number;
  clock?: () => number;
  /** Signs every META (the proxy's assertion key); unsigned without it (no origo to publish a key). */
  signer?: MetaSigner;
  /** Optional MUTP features left off, as a proxy one release behind (`--disable-features`). */
  disabledFeatures?: ConstructorParameters<typeof SourceEndpoint>[0]['disabledFeatures'];
}

export const DEFAULT_LOW_WATER_BYTES = 4 * 1200;

export interface TransferHostStats {
  clientId: string;
  transfersStarted: number;
  transfersActive: number;
  transfersPending: number;
  errorsSent: number;
  datagramsSent: number;
  bytesSent: number;
  malformed: number;
  unknownTransfer: number;
  codecFailures: number;
  /** Transfers that started from the previous transfer's path estimate (warm start). */
  warmStarts: number;
  /** Transfers that started at the proxy's upload capacity (no earlier estimate on this connection). */
  capStarts: number;
  /** FETCHINGs sent: REQUESTs repeated while their object came from the origin were told so. */
  fetchingSent: number;
  /** Times the pump stopped because the upload limit had no tokens. */
  uploadLimited: number;
  /** Times it stopped because the data channel was full (bufferedAmount at the low-water mark). */
  channelFull: number;
}

const MUTP_KIND = { kind: 'mutp' } as const;

const cryptoSeed = () => randomBytes(4).readUInt32BE(0);

export class TransferHost {
  /** Called once when the host closed (peer gone, idle, or close()), with the reason. */
  onClosed?: (reason: string) => void;

  private data?: DatagramChannel;
  private readonly channels = new Set<DatagramChannel>();
  private readonly endpoint: SourceEndpoint;
  /** Origin fetches this peer's transfers wait for, by transfer id. */
  private readonly fetches = new Map<number, AbortController>();
  /** When each transfer waiting for its object asked for it (clock ms): its time to first byte. */
  private readonly requestedAt = new Map<number, number>();
  private pumping = false;
  private closed = false;
  private readonly timer: DeadlineTimer;
  private readonly pacer: Pacer;
  /** What the pacer calls when tokens are back: the pump (one function, so waits do not pile up). */
  private readonly resume = () => this.pump();
  private lowWater: number;
  private readonly clock: () => number;
  private readonly log: Logger;
  private malformedSeen = 0;
  private unknownSeen = 0;
  private readonly counters = { datagramsSent: 0, bytesSent: 0, uploadLimited: 0, channelFull: 0 };

  /**
   * @param network the client's network as origo vouched for it (per-network shares of the
   *   proxy's transfers, memory and origin fetches); a client without one is its own network.
   */
  constructor(
    readonly clientId: string,
    private readonly services: TransferServices,
    readonly network = shareKey(clientId, undefined),
  ) {
    this.lowWater = services.lowWaterBytes ?? DEFAULT_LOW_WATER_BYTES;
    this.pacer = services.pacer ?? new Pacer(services.bucket);
    this.clock = services.clock ?? (() => performance.now());
    this.log = services.logger.child({ clientId });
    this.endpoint = new SourceEndpoint({
      clientKey: clientId,
      networkKey: network,
      codecs: services.codecs,
      admission: services.admission,
      seed: services.seed ?? cryptoSeed,
      now: this.clock(),
      senderConfig: services.senderConfig,
      uploadCapBps: services.uploadCapBps,
      limits: services.endpointLimits,
      sha256,
      signer: services.signer,
      disabledFeatures: services.disabledFeatures,
    });
    const guarded = {
      nextDeadline: () => this.endpoint.nextDeadline(),
      handleTimeout: (now: number) => {
        try {
          this.endpoint.handleTimeout(now);
        } catch (e) {
          // A bug must not take the proxy down with it (a timer callback has no caller to catch it).
          this.log.error({ err: e }, 'error while handling a timeout');
        }
      },
    };
    this.timer = new DeadlineTimer(guarded, scheduleAt(this.clock), this.clock, () => this.onTimeout());
    // The idle clock starts when the data channel opens (PeerManager times out connecting).
  }

  /** Adds a channel of the peer: every channel receives, the data channel also sends. */
  attach(channel: DatagramChannel): void {
    if (this.closed) {
      channel.close();
      return;
    }
    this.channels.add(channel);
    channel.onMessage = (bytes) => this.onDatagram(bytes);
    if (channel.label === DATA_CHANNEL_LABEL) {
      this.data = channel;
      // Only the data channel sends DATA: build each in one buffer when it copies on send.
      this.endpoint.reuseDatagramMemory(channel.copiesOnSend === true);
      if (channel.preferredLowWater !== undefined) this.lowWater = channel.preferredLowWater;
      // Wake up when the channel has drained to half the mark (a few datagrams left).
      channel.setLowWaterMark(this.lowWater / 2, () => this.pump());
      channel.onOpen = () => this.opened();
      channel.onClose = () => this.close('data channel closed');
      if (channel.isOpen) this.opened();
    } else {
      channel.onClose = () => this.channels.delete(channel);
    }
  }

  private opened(): void {
    this.endpoint.touch(this.clock());
    this.pump();
  }

  /** Ends every transfer of this peer (frees the codecs, withdraws fetches) and stops the timers. */
  close(reason = 'closed'): void {
    if (this.closed) return;
    this.closed = true;
    this.timer.stop();
    this.pacer.cancel(this.resume);
    this.endpoint.close(this.clock());
    this.drainEvents();
    for (const controller of this.fetches.values()) controller.abort();
    this.fetches.clear();
    for (const channel of this.channels) channel.close();
    this.channels.clear();
    this.log.debug({ reason }, 'transfer host closed');
    this.onClosed?.(reason);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  stats(): TransferHostStats {
    const e = this.endpoint.stats();
    return {
      clientId: this.clientId,
      transfersStarted: e.transfersStarted,
      transfersActive: e.transfersActive,
      transfersPending: e.transfersPending,
      errorsSent: e.errorsSent,
      malformed: e.malformed,
      unknownTransfer: e.unknownTransfer,
      codecFailures: e.codecFailures,
      warmStarts: e.warmStarts,
      capStarts: e.capStarts,
      fetchingSent: e.fetchingSent,
      ...this.counters,
    };
  }

  // ---------------------------------------------------------------- input

  private onDatagram(bytes: Uint8Array): void {
    if (this.closed) return;
    try {
      this.endpoint.handleDatagram(bytes, this.clock());
      this.countDrops();
      this.afterInput();
    } catch (e) {
      // A bug must not take the proxy down with it; the transfer concerned times out.
      this.log.error({ err: e }, 'error while handling a datagram');
    }
  }

  /** Metrics for datagrams the endpoint dropped (malformed, unknown transfer). */
  private countDrops(): void {
    const { malformed, unknownTransfer } = this.endpoint.dropped;
    const { metrics } = this.services;
    if (malformed > this.malformedSeen) metrics.malformedDatagrams.inc(malformed - this.malformedSeen);
    if (unknownTransfer > this.unknownSeen) metrics.unknownTransferDatagrams.inc(unknownTransfer - this.unknownSeen);
    this.malformedSeen = malformed;
    this.unknownSeen = unknownTransfer;
  }

  /** Acts on what the endpoint asked for, sends its control datagrams, then sends data. */
  private afterInput(): void {
    this.drainEvents();
    for (let d = this.endpoint.pollControl(); d; d = this.endpoint.pollControl()) this.sendControl(d);
    this.pump();
  }

  private drainEvents(): void {
    for (let e = this.endpoint.pollEvent(); e; e = this.endpoint.pollEvent()) this.onEvent(e);
  }

  private onEvent(e: EndpointEvent): void {
    const { metrics } = this.services;
    switch (e.type) {
      case 'fetch':
        this.requestedAt.set(e.transferId, this.clock());
        this.fetch(e.transferId, e.url, e.mode, e.range);
        break;
      case 'cancel-fetch':
        this.requestedAt.delete(e.transferId);
        this.fetches.get(e.transferId)?.abort();
        this.fetches.delete(e.transferId);
        break;
      case 'started': {
        // Without a fetch the REQUEST found its object at once (cached): its first byte is ready now.
        const requestedAt = this.requestedAt.get(e.transferId);
        this.requestedAt.delete(e.transferId);
        const waitedMs = requestedAt === undefined ? 0 : this.clock() - requestedAt;
        metrics.firstByteSeconds.observe({ mode: e.request.mode }, waitedMs / 1000);
        metrics.transfersActive.inc({ mode: e.request.mode });
        this.log.debug(
          { transferId: e.transferId, mode: e.request.mode, url: e.request.url, bytes: e.objectBytes },
          'transfer started',
        );
        break;
      }
      case 'ended': {
        metrics.transfersActive.dec({ mode: e.request.mode });
        metrics.transferSeconds.observe({ mode: e.request.mode }, e.durationMs / 1000);
        metrics.transfersTotal.inc({ mode: e.request.mode, outcome: e.outcome });
        if (e.outcome === 'done')
          this.services.hints?.creditCompleted(this.network, e.sender.layout.objectLength, this.clock());
        const s = e.sender.stats;
        this.log.debug(
          {
            transferId: e.transferId,
            mode: e.request.mode,
            outcome: e.outcome,
            ms: Math.round(e.durationMs),
            dataSent: s.dataSent,
            bytesSent: s.bytesSent,
            lost: s.lost,
            expired: s.expired,
            blockedByInFlight: s.blockedByInFlight,
            nothingToSend: s.nothingToSend,
            srttMs: round1(e.sender.rtt.smoothed),
            minRttMs: round1(e.sender.rtt.min),
          },
          'transfer ended',
        );
        break;
      }
      case 'refused':
        this.requestedAt.delete(e.transferId);
        this.log.info({ transferId: e.transferId, url: e.url, code: e.code, message: e.message }, 'refused');
        break;
      case 'idle':
        // Closing from inside the endpoint's event loop is safe: close() drains again and stops.
        queueMicrotask(() => this.close('idle: no transfer and no datagram within the idle timeout'));
        break;
    }
  }

  /** Fetches an object (or a range of it) for the endpoint; the fetch lives while the transfer waits for it. */
  private fetch(transferId: number, url: string, mode: Mode, range: ByteRange | undefined): void {
    const controller = new AbortController();
    this.fetches.set(transferId, controller);
    this.services.objects.get(url, controller.signal, range, this.network).then(
      (object) => {
        if (this.fetches.get(transferId) !== controller) return;
        this.fetches.delete(transferId);
        this.endpoint.objectReady(transferId, object, this.clock());
        this.afterInput();
      },
      (e: unknown) => {
        if (this.fetches.get(transferId) !== controller) return; // withdrawn: nobody to answer
        this.fetches.delete(transferId);
        const error = asServeError(e);
        this.services.metrics.transfersTotal.inc({ mode, outcome: error.kind });
        this.endpoint.objectFailed(transferId, wireErrorCode(error.kind), error.message, this.clock());
        this.afterInput();
      },
    );
  }

  /** The proxy drains: the client hears it once (ERROR GoingAway); its transfers under way go on. */
  goAway(reason: string): void {
    if (this.closed) return;
    this.endpoint.goAway(reason);
    this.afterInput();
  }

  /** A control message (ERROR): the data channel if open, else the feedback channel. */
  private sendControl(datagram: Uint8Array): void {
    if (this.data?.isOpen && this.data.send(datagram)) return;
    for (const channel of this.channels) if (channel !== this.data && channel.send(datagram)) return;
  }

  // ---------------------------------------------------------------- sending

  private pump(): void {
    if (this.closed || this.pumping) return;
    const data = this.data;
    if (!data || !data.isOpen || !this.endpoint.hasActive) {
      this.timer.arm();
      return;
    }
    // Out of tokens, this host sends when the pacer resumes it. A datagram in between (feedback,
    // a REQUEST) would find a datagram's worth at most and send it alone: one more native send
    // and runtime wake-up for one datagram, instead of the quantum back to back (issue 33).
    if (this.pacer.isWaiting(this.resume)) {
      this.timer.arm();
      return;
    }
    this.pumping = true;
    const { bucket, meter, metrics } = this.services;
    // Sent bytes go to the meter and the metrics once per pump (a prom-client inc per datagram
    // was a visible share of the proxy's CPU per packet).
    let sentBytes = 0;
    let now = 0;
    try {
      for (;;) {
        if (data.bufferedAmount >= this.lowWater) {
          this.counters.channelFull++;
          break; // the low-water callback resumes
        }
        now = this.clock();
        const wait = bucket.waitTime(MAX_DATAGRAM_BYTES, now);
        if (wait > 0) {
          this.counters.uploadLimited++;
          metrics.uploadWaits.inc();
          this.pacer.wait(this.resume, now);
          break;
        }
        const datagram = this.endpoint.pollDatagram(now);
        if (!datagram) break; // feedback or a deadline brings more
        bucket.take(datagram.length, now);
        if (!data.send(datagram)) break;
        this.counters.datagramsSent++;
        sentBytes += datagram.length;
      }
    } finally {
      this.pumping = false;
      if (sentBytes > 0) {
        this.counters.bytesSent += sentBytes;
        meter.add(sentBytes, now);
        metrics.bytesSent.inc(MUTP_KIND, sentBytes);
      }
    }
    // A codec failure while polling queued an ERROR and ended a transfer.
    this.drainEvents();
    for (let d = this.endpoint.pollControl(); d; d = this.endpoint.pollControl()) this.sendControl(d);
    this.timer.arm();
  }

  /** The endpoint had its timeout (idle transfers, retransmission timers): act on it, send. */
  private onTimeout(): void {
    if (this.closed) return;
    try {
      this.afterInput();
    } catch (e) {
      this.log.error({ err: e }, 'error while handling a timeout');
    }
  }
}

/** Real timers for the endpoint's deadlines, in whole milliseconds; an idle peer's never keeps the process alive. */
function scheduleAt(clock: () => number): ScheduleAt {
  return (at, fire) => {
    const timer = setTimeout(fire, Math.max(1, Math.ceil(at - clock())));
    timer.unref?.();
    return () => clearTimeout(timer);
  };
}

const round1 = (x: number) => Math.round(x * 10) / 10;
