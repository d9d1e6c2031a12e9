/**
 * Serves the MUTP transfers of one client peer connection. Datagrams from the client arrive on
 * either channel: a REQUEST for a new transferId starts a transfer (limits, object from the
 * cache, then a sans-IO `Sender`), FEEDBACK / STOP / repeated REQUESTs go to that transfer's
 * sender. Sending is late-binding: while the data channel's bufferedAmount is below a small
 * low-water mark and the proxy's token bucket has tokens, the active senders are polled
 * round-robin; otherwise the pump waits for the channel's low-water callback or the bucket's
 * refill. One timer per host follows the earliest sender deadline. Nothing a client sends can
 * crash it: malformed datagrams and datagrams for unknown transfers are counted and dropped.
 */
import {
  Codec,
  decode,
  encodeError,
  MAX_DATAGRAM_BYTES,
  MessageType,
  Mode,
  RequestMessage,
  schedulerSupports,
  seededRandom,
  Sender,
  SenderConfig,
} from '@mutp/shared';
import { DATA_CHANNEL_LABEL } from '@mutp/shared/node';
import type { DatagramChannel } from '@mutp/shared/node';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { Admission } from './admission';
import { asServeError, ServeError, wireErrorCode } from './errors';
import { ProxyMetrics } from './metrics';
import { CachedObject } from './object-cache';
import { ObjectProvider } from './object-source';
import { RateMeter } from './rate-meter';
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
  /** The pump sends while the data channel holds less than this (a few datagrams). */
  lowWaterBytes?: number;
  senderConfig?: Partial<SenderConfig>;
  /** Seeds of the per-transfer coefficient generators (default: crypto random). */
  seed?: () => number;
  clock?: () => number;
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
  /** Times the pump stopped because the upload limit had no tokens. */
  uploadLimited: number;
  /** Times it stopped because the data channel was full (bufferedAmount at the low-water mark). */
  channelFull: number;
}

interface Transfer {
  id: number;
  request: RequestMessage;
  startedAt: number;
  release: () => void;
  sender?: Sender;
  /** The client stopped it (or the peer closed) while its object was being fetched. */
  cancelled: boolean;
}

/** ERRORs recently sent, so a repeated REQUEST gets the same answer without a new fetch. */
interface RecentError {
  url: string;
  datagram: Uint8Array;
  at: number;
}
const RECENT_ERROR_MS = 5000;
const MAX_RECENT_ERRORS = 64;

export class TransferHost {
  /** Called once when the host closed (peer gone or close()). */
  onClosed?: () => void;

  private data?: DatagramChannel;
  private readonly channels = new Set<DatagramChannel>();
  private readonly transfers = new Map<number, Transfer>();
  /** Active senders in round-robin order. */
  private order: Transfer[] = [];
  private cursor = 0;
  private readonly recentErrors = new Map<number, RecentError>();
  private pumping = false;
  private closed = false;
  private deadlineTimer?: NodeJS.Timeout;
  private deadlineAt = Infinity;
  private bucketTimer?: NodeJS.Timeout;
  private readonly lowWater: number;
  private readonly clock: () => number;
  private readonly log: Logger;
  private readonly counters = {
    transfersStarted: 0,
    errorsSent: 0,
    datagramsSent: 0,
    bytesSent: 0,
    malformed: 0,
    unknownTransfer: 0,
    uploadLimited: 0,
    channelFull: 0,
  };

  constructor(
    readonly clientId: string,
    private readonly services: TransferServices,
  ) {
    this.lowWater = services.lowWaterBytes ?? DEFAULT_LOW_WATER_BYTES;
    this.clock = services.clock ?? (() => performance.now());
    this.log = services.logger.child({ clientId });
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
      // Wake up when the channel has drained to half the mark (a few datagrams left).
      channel.setLowWaterMark(this.lowWater / 2, () => this.pump());
      channel.onOpen = () => this.pump();
      channel.onClose = () => this.close('data channel closed');
      if (channel.isOpen) this.pump();
    } else {
      channel.onClose = () => this.channels.delete(channel);
    }
  }

  /** Ends every transfer of this peer (frees the codecs) and stops the timers. */
  close(reason = 'closed'): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.deadlineTimer);
    clearTimeout(this.bucketTimer);
    for (const t of this.transfers.values()) {
      if (t.sender) {
        t.sender.close();
        this.ended(t, 'closed');
      } else {
        t.cancelled = true;
        t.release();
      }
    }
    this.transfers.clear();
    this.order = [];
    for (const channel of this.channels) channel.close();
    this.channels.clear();
    this.log.debug({ reason }, 'transfer host closed');
    this.onClosed?.();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  stats(): TransferHostStats {
    let pending = 0;
    for (const t of this.transfers.values()) if (!t.sender) pending++;
    return {
      clientId: this.clientId,
      ...this.counters,
      transfersActive: this.order.length,
      transfersPending: pending,
    };
  }

  // ---------------------------------------------------------------- receiving

  private onDatagram(bytes: Uint8Array): void {
    if (this.closed) return;
    try {
      this.handle(bytes);
    } catch (e) {
      // A bug must not take the proxy down with it; the transfer concerned times out.
      this.log.error({ err: e }, 'error while handling a datagram');
    }
  }

  private handle(bytes: Uint8Array): void {
    const now = this.clock();
    const decoded = decode(bytes);
    if (!decoded.ok) {
      this.counters.malformed++;
      this.services.metrics.malformedDatagrams.inc();
      return;
    }
    const m = decoded.value;
    const transfer = this.transfers.get(m.transferId);
    if (transfer?.sender) {
      transfer.sender.handleDatagram(bytes, now);
      if (transfer.sender.status !== 'active') this.reap();
      this.pump();
      return;
    }
    if (transfer) {
      // Still fetching: a STOP cancels; repeated REQUESTs and early feedback wait for it.
      if (m.type === MessageType.Stop) {
        transfer.cancelled = true;
        transfer.release();
        this.transfers.delete(transfer.id);
      }
      return;
    }
    if (m.type === MessageType.Request) {
      this.start(m, now);
      return;
    }
    this.counters.unknownTransfer++;
    this.services.metrics.unknownTransferDatagrams.inc();
  }

  private start(request: RequestMessage, now: number): void {
    const recent = this.recentErrors.get(request.transferId);
    if (recent && recent.url === request.url && now - recent.at < RECENT_ERROR_MS) {
      this.sendControl(recent.datagram);
      return;
    }
    const codec = this.services.codecs[request.mode];
    if (!codec) {
      this.refuse(request, new ServeError('unsupported', `mode ${request.mode} is not served by this proxy`), now);
      return;
    }
    if (!schedulerSupports(request.mode, request.scheduler)) {
      this.refuse(
        request,
        new ServeError('unsupported', `scheduler ${request.scheduler} does not support mode ${request.mode}`),
        now,
      );
      return;
    }
    const slot = this.services.admission.tryAcquire(this.clientId);
    if (!slot.ok) {
      this.refuse(request, new ServeError('overloaded', slot.reason), now);
      return;
    }
    const transfer: Transfer = {
      id: request.transferId,
      request,
      startedAt: now,
      release: slot.release,
      cancelled: false,
    };
    this.transfers.set(transfer.id, transfer);
    this.counters.transfersStarted++;
    this.services.objects.get(request.url).then(
      (object) => this.begin(transfer, codec, object),
      (e) => {
        if (transfer.cancelled || this.closed) return;
        transfer.release();
        this.transfers.delete(transfer.id);
        this.services.metrics.transfersTotal.inc({ mode: request.mode, outcome: asServeError(e).kind });
        this.refuse(request, asServeError(e), this.clock());
      },
    );
  }

  private begin(transfer: Transfer, codec: Codec, object: CachedObject): void {
    if (transfer.cancelled || this.closed) return;
    const now = this.clock();
    try {
      transfer.sender = new Sender({
        request: transfer.request,
        object: object.bytes,
        digest: object.digest,
        codec,
        random: seededRandom(this.services.seed?.() ?? randomBytes(4).readUInt32BE(0)),
        now,
        config: this.services.senderConfig,
      });
    } catch (e) {
      transfer.release();
      this.transfers.delete(transfer.id);
      this.log.error({ err: e, transferId: transfer.id }, 'cannot create the sender');
      this.refuse(transfer.request, new ServeError('internal', 'cannot start the transfer'), now);
      return;
    }
    this.order.push(transfer);
    this.services.metrics.transfersActive.inc({ mode: transfer.request.mode });
    this.log.debug(
      { transferId: transfer.id, mode: transfer.request.mode, url: transfer.request.url, bytes: object.bytes.length },
      'transfer started',
    );
    this.pump();
  }

  /** Answers a REQUEST with ERROR (and remembers it for repeats); keeps no transfer state. */
  private refuse(request: RequestMessage, error: ServeError, now: number): void {
    const datagram = encodeError({
      transferId: request.transferId,
      code: wireErrorCode(error.kind),
      message: error.message,
    });
    if (this.recentErrors.size >= MAX_RECENT_ERRORS) {
      const oldest = this.recentErrors.keys().next().value;
      if (oldest !== undefined) this.recentErrors.delete(oldest);
    }
    this.recentErrors.delete(request.transferId);
    this.recentErrors.set(request.transferId, { url: request.url, datagram, at: now });
    this.counters.errorsSent++;
    this.log.info(
      { transferId: request.transferId, url: request.url, kind: error.kind, message: error.message },
      'refused',
    );
    this.sendControl(datagram);
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
    if (!data || !data.isOpen || this.order.length === 0) {
      this.armDeadline();
      return;
    }
    this.pumping = true;
    try {
      const { bucket, meter, metrics } = this.services;
      for (;;) {
        if (data.bufferedAmount >= this.lowWater) {
          this.counters.channelFull++;
          break; // the low-water callback resumes
        }
        const now = this.clock();
        const wait = bucket.waitTime(MAX_DATAGRAM_BYTES, now);
        if (wait > 0) {
          this.counters.uploadLimited++;
          metrics.uploadWaits.inc();
          this.armBucket(wait);
          break;
        }
        const datagram = this.pollRoundRobin(now);
        if (!datagram) break; // feedback or a deadline brings more
        bucket.take(datagram.length, now);
        if (!data.send(datagram)) break;
        this.counters.datagramsSent++;
        this.counters.bytesSent += datagram.length;
        meter.add(datagram.length, now);
        metrics.bytesSent.inc({ kind: 'mutp' }, datagram.length);
      }
    } finally {
      this.pumping = false;
    }
    this.reap();
    this.armDeadline();
  }

  private pollRoundRobin(now: number): Uint8Array | null {
    const n = this.order.length;
    for (let k = 0; k < n; k++) {
      const i = (this.cursor + k) % n;
      const datagram = this.order[i].sender!.pollDatagram(now);
      if (datagram) {
        this.cursor = (i + 1) % n;
        return datagram;
      }
    }
    return null;
  }

  private armBucket(waitMs: number): void {
    if (this.bucketTimer) return;
    this.bucketTimer = setTimeout(
      () => {
        this.bucketTimer = undefined;
        this.pump();
      },
      Math.max(1, Math.ceil(waitMs)),
    );
  }

  /** One timer at the earliest sender deadline. */
  private armDeadline(): void {
    if (this.closed) return;
    let deadline = Infinity;
    for (const t of this.order) {
      const d = t.sender!.nextDeadline();
      if (d !== null && d < deadline) deadline = d;
    }
    if (deadline === Infinity) {
      clearTimeout(this.deadlineTimer);
      this.deadlineTimer = undefined;
      this.deadlineAt = Infinity;
      return;
    }
    // Keep an armed timer that fires no later than needed (an early wake-up just re-arms).
    if (this.deadlineTimer && this.deadlineAt <= deadline) return;
    clearTimeout(this.deadlineTimer);
    this.deadlineAt = deadline;
    this.deadlineTimer = setTimeout(() => this.onDeadline(), Math.max(1, Math.ceil(deadline - this.clock())));
  }

  private onDeadline(): void {
    this.deadlineTimer = undefined;
    this.deadlineAt = Infinity;
    if (this.closed) return;
    const now = this.clock();
    for (const t of this.order) {
      const d = t.sender!.nextDeadline();
      if (d !== null && d <= now) t.sender!.handleTimeout(now);
    }
    this.reap();
    this.pump();
  }

  /** Removes finished and failed senders (they freed their codecs). */
  private reap(): void {
    if (!this.order.some((t) => t.sender!.status !== 'active')) return;
    const live: Transfer[] = [];
    for (const t of this.order) {
      const sender = t.sender!;
      if (sender.status === 'active') {
        live.push(t);
        continue;
      }
      this.transfers.delete(t.id);
      this.ended(t, sender.status === 'done' ? 'done' : (sender.error?.code ?? 'failed'));
    }
    this.order = live;
    if (this.cursor >= live.length) this.cursor = 0;
  }

  private ended(t: Transfer, outcome: string): void {
    t.release();
    const { metrics } = this.services;
    metrics.transfersActive.dec({ mode: t.request.mode });
    metrics.transfersTotal.inc({ mode: t.request.mode, outcome });
    const s = t.sender!.stats;
    this.log.debug(
      {
        transferId: t.id,
        mode: t.request.mode,
        outcome,
        ms: Math.round(this.clock() - t.startedAt),
        dataSent: s.dataSent,
        bytesSent: s.bytesSent,
        lost: s.lost,
        expired: s.expired,
        blockedByInFlight: s.blockedByInFlight,
        nothingToSend: s.nothingToSend,
        srttMs: round1(t.sender!.rtt.smoothed),
        minRttMs: round1(t.sender!.rtt.min),
      },
      'transfer ended',
    );
  }
}

const round1 = (x: number) => Math.round(x * 10) / 10;
