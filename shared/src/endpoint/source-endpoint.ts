/**
 * The source side of MUTP for one client peer, sans-IO (the role of quinn-proto's `Endpoint`):
 * every datagram from the client is decoded once and routed by transfer id; a REQUEST passes
 * admission (slots and a memory budget) and asks the caller for the object; a STOP ends a
 * transfer at any stage, also while its object is still being fetched; codec failures end one
 * transfer with an ERROR, never the process. The caller owns the I/O: it feeds datagrams and the
 * time, fetches objects when told (`fetch` / `cancel-fetch` events), pulls datagrams to send
 * (paced as it likes), and calls `handleTimeout` at `nextDeadline()`. The proxy and the
 * simulator run this same code, so the simulator exercises the proxy's admission and abuse paths.
 */
import { Layout } from '../layout';
import { MAX_DATAGRAM_BYTES } from '../limits';
import { seededRandom } from '../random';
import { ByteRange } from '../range';
import { DEFAULT_SENDER_CONFIG, PathEstimate, Sender } from '../sender/sender';
import {
  Capabilities,
  CONNECTION_TRANSFER_ID,
  decode,
  ErrorCode,
  Feature,
  featureNames,
  MessageType,
  Mode,
  parseFeatureList,
  RequestMessage,
} from '../wire';
import { metaShape, ownCapabilities, unknownFeature } from './capability-rules';
import { Grant } from './admission';
import { clip, errorDatagram, ErrorReplies, messageOf } from './error-replies';
import { FetchingReply } from './fetching-replies';
import { LayoutRules, objectLayout, refusedLayout } from './layout-rules';
import { EncoderBudgetError, sharingCodec } from './shared-encoders';
import { attributesFor, SourceObject } from './source-object';
import { DEFAULT_ENDPOINT_LIMITS, EndpointLimits, SourceEndpointOptions } from './config';
import { WarmStart } from './warm-start';

/** What a transfer waiting for its object holds (request, URL, record): charged at admission. */
export const PENDING_TRANSFER_BYTES = 2048;
/** A Sender's fixed state: its ring of 8192 in-flight records and the codec's scratch. */
export const SENDER_FIXED_BYTES = 128 * 1024;
/**
 * A Sender's state per unit: ranks, transit, delivered, window entry time, fountain block ids,
 * the slot partition it was begun under (20 bytes), and its share of the DIGESTS datagrams (16
 * bytes per check unit, at most one per unit).
 */
export const SENDER_BYTES_PER_UNIT = 42;

/** Bytes of sender state one transfer of this layout holds (what admission charges). */
export function senderStateBytes(layout: Layout): number {
  return SENDER_FIXED_BYTES + SENDER_BYTES_PER_UNIT * layout.unitCount;
}

export type EndpointEvent =
  /** Get the object at `url`, then call objectReady or objectFailed. */
  | { type: 'fetch'; transferId: number; url: string; mode: Mode; range?: ByteRange }
  /** Nobody waits for that fetch any more (a STOP, the peer closed). */
  | { type: 'cancel-fetch'; transferId: number }
  | { type: 'started'; transferId: number; request: RequestMessage; objectBytes: number }
  | { type: 'ended'; transferId: number; request: RequestMessage; outcome: string; durationMs: number; sender: Sender }
  | { type: 'refused'; transferId: number; url: string; code: number; message: string }
  /** No transfer and no datagram for `idleTimeoutMs`. */
  | { type: 'idle' };

export interface SourceEndpointStats {
  transfersStarted: number;
  transfersActive: number;
  transfersPending: number;
  errorsSent: number;
  malformed: number;
  unknownTransfer: number;
  /** Transfers ended because their codec failed (e.g. out of wasm memory). */
  codecFailures: number;
  /** Control datagrams dropped because the queue was full. */
  controlDropped: number;
  /** Transfers that started from the previous transfer's path estimate. */
  warmStarts: number;
  /** Transfers that started at the source's known upload capacity (no recent path estimate). */
  capStarts: number;
  /** FETCHING datagrams sent (answers to REQUESTs repeated while their object was fetched). */
  fetchingSent: number;
}

interface Transfer {
  id: number;
  request: RequestMessage;
  startedAt: number;
  grant: Grant;
  sender?: Sender;
  unhold?: () => void;
  /** While it waits for its object: what a repeated REQUEST is answered with (FETCHING). */
  fetching: FetchingReply;
}

export class SourceEndpoint {
  private readonly limits: EndpointLimits;
  private readonly transfers = new Map<number, Transfer>();
  /** Transfers with a Sender, in round-robin order. */
  private order: Transfer[] = [];
  private cursor = 0;
  private readonly errors: ErrorReplies;
  private readonly layoutRules: LayoutRules;
  private readonly warmStart: WarmStart;
  private readonly events: EndpointEvent[] = [];
  private lastActivity: number;
  private idleReported = false;
  private closed = false;
  /** Where DATA datagrams are built (reuseDatagramMemory), or undefined: a new array each. */
  private datagramBuffer?: Uint8Array;
  /** Why the source is going away (goAway()), once it is: new REQUESTs are refused with it. */
  private goingAwayReason?: string;
  private readonly counters = {
    transfersStarted: 0,
    errorsSent: 0,
    malformed: 0,
    unknownTransfer: 0,
    codecFailures: 0,
    controlDropped: 0,
    warmStarts: 0,
    capStarts: 0,
    fetchingSent: 0,
  };

  /**
   * The optional features a source with `disabled` switched off declares (origo's registration),
   * by name (docs/protocol.md §13).
   */
  static declaredFeatures(disabled: readonly Feature[] = []): Feature[] {
    return featureNames(ownCapabilities(disabled));
  }

  /** A list of feature names as an option gives it (`resume,ranges`); throws RangeError on an unknown one. */
  static parseFeatures(text: string): Feature[] {
    return parseFeatureList(text);
  }

  /** What this source understands: every feature but those switched off. */
  private readonly capabilities: Capabilities;

  constructor(private readonly opts: SourceEndpointOptions) {
    this.capabilities = ownCapabilities(opts.disabledFeatures);
    this.limits = { ...DEFAULT_ENDPOINT_LIMITS, ...opts.limits };
    this.lastActivity = opts.now;
    this.errors = new ErrorReplies(this.limits);
    this.layoutRules = { codecs: opts.codecs, minSymbolSize: this.limits.minSymbolSize };
    const initialRttMs = opts.senderConfig?.initialRttMs ?? DEFAULT_SENDER_CONFIG.initialRttMs;
    this.warmStart = new WarmStart(this.limits.pathMemoryMs, opts.uploadCapBps, initialRttMs);
  }

  get clientKey(): string {
    return this.opts.clientKey;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  // ---------------------------------------------------------------- input

  /** A datagram from the client (either channel). */
  handleDatagram(bytes: Uint8Array, now: number): void {
    if (this.closed) return;
    this.lastActivity = now;
    this.idleReported = false;
    const decoded = decode(bytes);
    if (!decoded.ok) {
      this.counters.malformed++;
      return;
    }
    const m = decoded.value;
    // A feature switched off: dropped as the release before it would reject the datagram.
    if (unknownFeature(m, this.capabilities) !== undefined) {
      this.counters.malformed++;
      return;
    }
    const transfer = this.transfers.get(m.transferId);
    if (transfer?.sender) {
      try {
        transfer.sender.handleMessage(m, now);
      } catch (e) {
        this.codecFailed(transfer, e, now);
        return;
      }
      this.endIfDone(transfer, now);
    } else if (transfer) {
      // Still waiting for the object: a STOP ends it now; a repeated REQUEST hears that the fetch
      // is under way (FETCHING, where the client reads it); early feedback waits.
      if (m.type === MessageType.Stop) this.dropPending(transfer);
      else if (m.type === MessageType.Request) this.answerFetching(transfer, now);
    } else if (m.type === MessageType.Request) {
      this.start(m, now);
    } else {
      this.counters.unknownTransfer++;
    }
  }

  /** The peer showed life without a datagram (its channel opened): restarts the idle clock. */
  touch(now: number): void {
    this.lastActivity = Math.max(this.lastActivity, now);
    this.idleReported = false;
  }

  /** The object a `fetch` event asked for. Ignored if the transfer ended meanwhile. */
  objectReady(transferId: number, object: SourceObject, now: number): void {
    const t = this.transfers.get(transferId);
    if (!t || t.sender || this.closed) return;
    const { request } = t;
    const codec = this.opts.codecs[request.mode]!;
    const layout = objectLayout(this.layoutRules, request, object.bytes.length);
    if (!(layout instanceof Layout)) {
      this.failPending(t, layout.code, layout.message, now);
      return;
    }
    const attributes = attributesFor(request, object);
    if (typeof attributes === 'string') {
      this.failPending(t, ErrorCode.Internal, attributes, now);
      return;
    }
    // What this client is sent beyond the identity: only what it declared it understands.
    const shape = metaShape(request, this.capabilities, attributes, this.opts.signer !== undefined);
    const bytes = senderStateBytes(layout) + (object.cached ? 0 : object.bytes.length);
    if (!t.grant.charge(bytes)) {
      this.failPending(t, ErrorCode.Overloaded, 'proxy memory budget for transfers is full', now);
      return;
    }
    const remembered = this.warmStart.recentPath(now);
    const warmStart = remembered ?? this.warmStart.capStart();
    try {
      t.sender = new Sender({
        request,
        object: object.bytes,
        digest: object.digest,
        unitDigests: object.digests?.of(layout),
        attributes: shape.attributes,
        sha256: this.opts.sha256,
        signer: shape.signed ? this.opts.signer : undefined,
        metaExtensions: shape.extensions,
        provenance: object.provenance,
        codec: sharingCodec(codec, object.encoders),
        random: seededRandom(this.opts.seed()),
        now,
        config: this.opts.senderConfig,
        warmStart,
        datagramBuffer: this.datagramBuffer,
      });
      if (remembered) this.counters.warmStarts++;
      else if (warmStart) this.counters.capStarts++;
    } catch (e) {
      const overloaded = e instanceof EncoderBudgetError;
      if (!overloaded) this.counters.codecFailures++;
      this.failPending(
        t,
        overloaded ? ErrorCode.Overloaded : ErrorCode.Internal,
        overloaded ? e.message : `cannot start the transfer: ${messageOf(e)}`,
        now,
      );
      return;
    }
    t.unhold = object.hold?.();
    this.order.push(t);
    this.events.push({ type: 'started', transferId: t.id, request, objectBytes: object.bytes.length });
  }

  /** The fetch for `transferId` failed: the client gets an ERROR with this code. */
  objectFailed(transferId: number, code: number, message: string, now: number): void {
    const t = this.transfers.get(transferId);
    if (!t || t.sender || this.closed) return;
    this.failPending(t, code, message, now);
  }

  /**
   * The source is shutting down (draining): tells the client once, with an ERROR GoingAway for the
   * whole connection, so it can move its next transfers elsewhere between two of them; transfers
   * under way go on, new REQUESTs are refused with the same code.
   */
  goAway(reason: string): void {
    if (this.closed || this.goingAwayReason !== undefined) return;
    this.goingAwayReason = clip(reason);
    this.queueControl(errorDatagram(CONNECTION_TRANSFER_ID, ErrorCode.GoingAway, this.goingAwayReason));
    this.counters.errorsSent++;
  }

  get goingAway(): boolean {
    return this.goingAwayReason !== undefined;
  }

  /** Call at nextDeadline(): sender timers and the idle check. */
  handleTimeout(now: number): void {
    if (this.closed) return;
    for (const t of [...this.order]) {
      const d = t.sender!.nextDeadline();
      if (d === null || d > now) continue;
      try {
        t.sender!.handleTimeout(now);
      } catch (e) {
        this.codecFailed(t, e, now);
        continue;
      }
      this.endIfDone(t, now);
    }
    if (!this.idleReported && this.transfers.size === 0 && now - this.lastActivity >= this.limits.idleTimeoutMs) {
      this.idleReported = true;
      this.events.push({ type: 'idle' });
    }
  }

  /** Ends every transfer (the peer is gone): pending fetches are cancelled, senders freed. */
  close(now: number): void {
    if (this.closed) return;
    for (const t of [...this.transfers.values()]) {
      if (t.sender) this.end(t, 'closed', now);
      else this.dropPending(t);
    }
    this.order = [];
    this.closed = true;
  }

  // ---------------------------------------------------------------- output

  /** The next event for the caller, or null. */
  pollEvent(): EndpointEvent | null {
    return this.events.shift() ?? null;
  }

  /** A control datagram (ERROR, FETCHING) to send on any channel, or null. Not paced. */
  pollControl(): Uint8Array | null {
    return this.errors.poll();
  }

  /** The next data datagram, taking active transfers in turn; null when none has one now. */
  pollDatagram(now: number): Uint8Array | null {
    // A transfer that ends leaves the order while we walk it: re-read its length.
    for (let k = 0; k < this.order.length; k++) {
      const i = (this.cursor + k) % this.order.length;
      const t = this.order[i];
      let datagram: Uint8Array | null;
      try {
        datagram = t.sender!.pollDatagram(now);
      } catch (e) {
        this.codecFailed(t, e, now);
        k--;
        continue;
      }
      if (datagram) {
        this.cursor = (i + 1) % this.order.length;
        return datagram;
      }
      if (this.endIfDone(t, now)) k--;
    }
    return null;
  }

  /** When handleTimeout should next be called, or null. */
  nextDeadline(): number | null {
    if (this.closed) return null;
    let deadline = Infinity;
    for (const t of this.order) {
      const d = t.sender!.nextDeadline();
      if (d !== null && d < deadline) deadline = d;
    }
    if (this.transfers.size === 0 && !this.idleReported)
      deadline = Math.min(deadline, this.lastActivity + this.limits.idleTimeoutMs);
    return deadline === Infinity ? null : deadline;
  }

  /** The Sender of a transfer, while it runs (a view for the simulator and tests). */
  sender(transferId: number): Sender | undefined {
    return this.transfers.get(transferId)?.sender;
  }

  /**
   * On: DATA datagrams are built in one buffer of this endpoint, each valid until the next
   * pollDatagram (for a host whose channel copies a datagram before send() returns: no
   * allocation per packet). Off (the default): each is an array of its own.
   */
  reuseDatagramMemory(on: boolean): void {
    this.datagramBuffer = on ? (this.datagramBuffer ?? new Uint8Array(MAX_DATAGRAM_BYTES)) : undefined;
    for (const t of this.order) t.sender!.datagramBuffer = this.datagramBuffer;
  }

  /** Whether any transfer has a Sender (the caller's pump has something to ask). */
  get hasActive(): boolean {
    return this.order.length > 0;
  }

  /** Datagrams dropped so far: malformed, and for transfers this peer does not have. */
  get dropped(): { readonly malformed: number; readonly unknownTransfer: number } {
    return this.counters;
  }

  stats(): SourceEndpointStats {
    return {
      ...this.counters,
      transfersActive: this.order.length,
      transfersPending: this.transfers.size - this.order.length,
    };
  }

  // ---------------------------------------------------------------- internals

  private start(request: RequestMessage, now: number): void {
    const answered = this.errors.recentAnswer(request, now);
    if (answered) {
      this.queueControl(answered);
      return;
    }
    if (request.transferId === CONNECTION_TRANSFER_ID) {
      this.refuse(
        request,
        ErrorCode.BadRequest,
        `transferId ${CONNECTION_TRANSFER_ID} names the connection, not a transfer`,
        now,
      );
      return;
    }
    if (this.goingAwayReason !== undefined) {
      this.refuse(request, ErrorCode.GoingAway, this.goingAwayReason, now);
      return;
    }
    const refusal = refusedLayout(this.layoutRules, request);
    if (refusal) {
      this.refuse(request, refusal.code, refusal.message, now);
      return;
    }
    const slot = this.opts.admission.tryAcquire(
      this.opts.clientKey,
      PENDING_TRANSFER_BYTES,
      this.opts.networkKey ?? this.opts.clientKey,
    );
    if (!slot.ok) {
      this.refuse(request, ErrorCode.Overloaded, slot.reason, now);
      return;
    }
    const fetching = new FetchingReply(request, this.capabilities, this.limits, this.opts.signer);
    this.transfers.set(request.transferId, {
      id: request.transferId,
      request,
      startedAt: now,
      grant: slot.grant,
      fetching,
    });
    this.counters.transfersStarted++;
    this.events.push({
      type: 'fetch',
      transferId: request.transferId,
      url: request.url,
      mode: request.mode,
      ...(request.range ? { range: request.range } : {}),
    });
  }

  /** A REQUEST repeated while its object is fetched: FETCHING, at most once per interval. */
  private answerFetching(t: Transfer, now: number): void {
    const datagram = t.fetching.answer(now);
    if (!datagram) return;
    this.queueControl(datagram);
    this.counters.fetchingSent++;
  }

  /**
   * A call into a transfer's Sender threw (a codec out of memory, a bug): that transfer ends with
   * an ERROR to the client; the other transfers and the caller go on.
   */
  private codecFailed(t: Transfer, e: unknown, now: number): void {
    this.counters.codecFailures++;
    this.sendError(t.request, ErrorCode.Internal, `transfer failed at the proxy: ${messageOf(e)}`);
    this.end(t, 'codec-error', now);
  }

  /** Ends a transfer whose Sender finished or failed; true if it did. */
  private endIfDone(t: Transfer, now: number): boolean {
    const sender = t.sender!;
    if (sender.status === 'active') return false;
    this.end(t, sender.status === 'done' ? 'done' : (sender.error?.code ?? 'failed'), now);
    return true;
  }

  /**
   * Remembers a path estimate for the next transfer's warm start (the endpoint does so itself
   * when a transfer ends; a host may seed it, e.g. the simulator's warm-connection runs).
   */
  rememberPath(estimate: PathEstimate, now: number): void {
    this.warmStart.remember(estimate, now);
  }

  private end(t: Transfer, outcome: string, now: number): void {
    if (!this.transfers.delete(t.id)) return;
    this.lastActivity = Math.max(this.lastActivity, now);
    const sender = t.sender!;
    const estimate = sender.pathEstimate();
    if (estimate) this.rememberPath(estimate, now);
    try {
      sender.close();
    } catch {
      // The codec is already broken; its lease is gone either way.
    }
    t.grant.release();
    t.unhold?.();
    const i = this.order.indexOf(t);
    if (i >= 0) {
      this.order.splice(i, 1);
      if (this.cursor > i) this.cursor--;
      if (this.cursor >= this.order.length) this.cursor = 0;
    }
    this.events.push({
      type: 'ended',
      transferId: t.id,
      request: t.request,
      outcome,
      durationMs: now - t.startedAt,
      sender,
    });
  }

  private dropPending(t: Transfer): void {
    this.transfers.delete(t.id);
    t.grant.release();
    this.events.push({ type: 'cancel-fetch', transferId: t.id });
  }

  private failPending(t: Transfer, code: number, message: string, now: number): void {
    this.transfers.delete(t.id);
    this.lastActivity = Math.max(this.lastActivity, now);
    t.grant.release();
    this.refuse(t.request, code, message, now);
  }

  /** Answers a REQUEST with ERROR and remembers it for repeats; keeps no transfer state. */
  private refuse(request: RequestMessage, code: number, message: string, now: number): void {
    const datagram = this.sendError(request, code, message);
    this.errors.remember(request, datagram, now);
    this.events.push({ type: 'refused', transferId: request.transferId, url: request.url, code, message });
  }

  private sendError(request: RequestMessage, code: number, message: string): Uint8Array {
    const datagram = errorDatagram(request.transferId, code, message);
    this.queueControl(datagram);
    this.counters.errorsSent++;
    return datagram;
  }

  private queueControl(datagram: Uint8Array): void {
    if (!this.errors.queue(datagram)) this.counters.controlDropped++;
  }
}
