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
import { Codec } from '../codec/types';
import { Sha256 } from '../integrity';
import { Layout } from '../layout';
import { MAX_DATAGRAM_BYTES } from '../limits';
import { schedulerSupports } from '../modes';
import { seededRandom } from '../random';
import { ByteRange, ObjectAttributes, servedRangeProblem, validContentType } from '../range';
import { AssertionProvenance } from '../assertion';
import { DEFAULT_SENDER_CONFIG, MetaSigner, PathEstimate, Sender, SenderConfig } from '../sender/sender';
import { CONNECTION_TRANSFER_ID, decode, encodeError, ErrorCode, MessageType, Mode, RequestMessage } from '../wire';
import { Admission, Grant } from './admission';
import { LayoutDigests } from './layout-digests';
import { EncoderBudgetError, SharedEncoders, sharingCodec } from './shared-encoders';

/** An object ready to serve, as the caller's cache holds it. */
export interface SourceObject {
  bytes: Uint8Array;
  /** SHA-256 of bytes (reported in META). */
  digest: Uint8Array;
  /** Encoders shared by every transfer of this object. */
  encoders: SharedEncoders;
  /** Unit digests per layout, shared likewise (absent: each Sender hashes the object itself). */
  digests?: LayoutDigests;
  /** False when no cache accounts for the bytes: the transfer is charged for them. */
  cached: boolean;
  /** Marks the transfer as a user of the bytes until the returned function is called. */
  hold?(): () => void;
  /** The origin's Content-Type (validContentType), reported in META. */
  contentType?: string;
  /** For a ranged REQUEST: where the bytes sit in the resource (servedRangeProblem must pass). */
  range?: { start: number; completeLength?: number };
  /** When the bytes came from the origin and its validator: what a signed META asserts of them. */
  provenance?: AssertionProvenance;
}

export interface EndpointLimits {
  /**
   * Smallest symbol a client may ask for. Per-unit bookkeeping scales with object / symbol, so a
   * 16-byte symbol would make a 64 MiB object cost 4 M units of state.
   */
  minSymbolSize: number;
  /** A peer with no transfer and no datagram for this long is reported idle (the caller closes it). */
  idleTimeoutMs: number;
  /** Control datagrams (ERRORs) waiting to be sent; beyond, the oldest are dropped. */
  maxControlQueue: number;
  /** Refusals remembered so a repeated REQUEST gets the same answer without a new fetch. */
  maxRecentErrors: number;
  recentErrorMs: number;
  /**
   * A transfer that starts within this long of the previous one's end on the same connection
   * starts from that transfer's path estimate (Sender `warmStart`). Players ask for a segment
   * every few seconds; longer gaps fall back to the cautious initial window.
   */
  pathMemoryMs: number;
}

export const DEFAULT_ENDPOINT_LIMITS: EndpointLimits = {
  minSymbolSize: 256,
  idleTimeoutMs: 30_000,
  maxControlQueue: 64,
  maxRecentErrors: 64,
  recentErrorMs: 5000,
  pathMemoryMs: 10_000,
};

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

export interface SourceEndpointOptions {
  /** Whom per-client limits count against (a token subject, a peer id). */
  clientKey: string;
  /** The client's network, whom per-network shares count against (default: clientKey). */
  networkKey?: string;
  codecs: Partial<Record<Mode, Codec>>;
  admission: Admission;
  /** Seeds of the per-transfer coefficient generators. */
  seed: () => number;
  now: number;
  senderConfig?: Partial<SenderConfig>;
  /**
   * The source's own upload capacity in bytes/s, when it knows it (a proxy's upload limit). A
   * transfer with no recent path estimate starts sending at this rate instead of growing from
   * `initialWindowPackets`: the first round trip is otherwise spent at a fraction of the link,
   * which costs most at the start of short downloads. The client's rate reports take over after
   * the first round trip, so a source shared by several clients settles at its share.
   */
  uploadCapBps?: number;
  limits?: Partial<EndpointLimits>;
  /** SHA-256 for integrity digests (Node hosts pass node:crypto's; default a portable one). */
  sha256?: Sha256;
  /** Signs every META's assertion (a proxy's key, published by origo); unsigned without it. */
  signer?: MetaSigner;
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
}

interface Transfer {
  id: number;
  request: RequestMessage;
  startedAt: number;
  grant: Grant;
  sender?: Sender;
  unhold?: () => void;
}

interface RecentError {
  url: string;
  datagram: Uint8Array;
  at: number;
}

export class SourceEndpoint {
  private readonly limits: EndpointLimits;
  private readonly transfers = new Map<number, Transfer>();
  /** Transfers with a Sender, in round-robin order. */
  private order: Transfer[] = [];
  private cursor = 0;
  private readonly control: Uint8Array[] = [];
  private readonly events: EndpointEvent[] = [];
  private readonly recentErrors = new Map<number, RecentError>();
  private lastActivity: number;
  private idleReported = false;
  private closed = false;
  /** Where DATA datagrams are built (reuseDatagramMemory), or undefined: a new array each. */
  private datagramBuffer?: Uint8Array;
  /** Why the source is going away (goAway()), once it is: new REQUESTs are refused with it. */
  private goingAwayReason?: string;
  /** The last ended transfer's path estimate (warm start for the next one). */
  private lastPath?: { estimate: PathEstimate; at: number };
  private readonly counters = {
    transfersStarted: 0,
    errorsSent: 0,
    malformed: 0,
    unknownTransfer: 0,
    codecFailures: 0,
    controlDropped: 0,
    warmStarts: 0,
    capStarts: 0,
  };

  constructor(private readonly opts: SourceEndpointOptions) {
    this.limits = { ...DEFAULT_ENDPOINT_LIMITS, ...opts.limits };
    this.lastActivity = opts.now;
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
      // Still waiting for the object: a STOP ends it now; repeated REQUESTs and early feedback wait.
      if (m.type === MessageType.Stop) this.dropPending(transfer);
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
    let layout: Layout;
    try {
      layout = new Layout(request.mode, object.bytes.length, request.symbolSize, request.generationSize);
    } catch (e) {
      this.failPending(t, ErrorCode.BadRequest, `cannot lay out the object: ${messageOf(e)}`, now);
      return;
    }
    const attributes = attributesFor(request, object);
    if (typeof attributes === 'string') {
      this.failPending(t, ErrorCode.Internal, attributes, now);
      return;
    }
    const bytes = senderStateBytes(layout) + (object.cached ? 0 : object.bytes.length);
    if (!t.grant.charge(bytes)) {
      this.failPending(t, ErrorCode.Overloaded, 'proxy memory budget for transfers is full', now);
      return;
    }
    const remembered = this.recentPath(now);
    const warmStart = remembered ?? this.capStart();
    try {
      t.sender = new Sender({
        request,
        object: object.bytes,
        digest: object.digest,
        unitDigests: object.digests?.of(layout),
        attributes,
        sha256: this.opts.sha256,
        signer: this.opts.signer,
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
    this.queueControl(
      encodeError({ transferId: CONNECTION_TRANSFER_ID, code: ErrorCode.GoingAway, message: this.goingAwayReason }),
    );
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

  /** A control datagram (ERROR) to send on any channel, or null. Not paced. */
  pollControl(): Uint8Array | null {
    return this.control.shift() ?? null;
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
    const recent = this.recentErrors.get(request.transferId);
    if (recent && recent.url === request.url && now - recent.at < this.limits.recentErrorMs) {
      this.queueControl(recent.datagram);
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
    if (!this.opts.codecs[request.mode]) {
      this.refuse(request, ErrorCode.Unsupported, `mode ${request.mode} is not served by this proxy`, now);
      return;
    }
    if (!schedulerSupports(request.mode, request.scheduler)) {
      const message = `scheduler ${request.scheduler} does not support mode ${request.mode}`;
      this.refuse(request, ErrorCode.Unsupported, message, now);
      return;
    }
    if (request.symbolSize < this.limits.minSymbolSize) {
      const message = `symbol size ${request.symbolSize} is below this proxy's minimum of ${this.limits.minSymbolSize}`;
      this.refuse(request, ErrorCode.Unsupported, message, now);
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
    this.transfers.set(request.transferId, { id: request.transferId, request, startedAt: now, grant: slot.grant });
    this.counters.transfersStarted++;
    this.events.push({
      type: 'fetch',
      transferId: request.transferId,
      url: request.url,
      mode: request.mode,
      ...(request.range ? { range: request.range } : {}),
    });
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
    this.lastPath = { estimate, at: now };
  }

  /** A first estimate from the known capacity; the RTT is the sender's initial guess until measured. */
  private capStart(): PathEstimate | undefined {
    const cap = this.opts.uploadCapBps;
    if (cap === undefined || !(cap > 0)) return undefined;
    return { rateBps: cap, minRttMs: this.opts.senderConfig?.initialRttMs ?? DEFAULT_SENDER_CONFIG.initialRttMs };
  }

  private recentPath(now: number): PathEstimate | undefined {
    const p = this.lastPath;
    return p && now - p.at <= this.limits.pathMemoryMs ? p.estimate : undefined;
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
    if (this.recentErrors.size >= this.limits.maxRecentErrors) {
      const oldest = this.recentErrors.keys().next().value;
      if (oldest !== undefined) this.recentErrors.delete(oldest);
    }
    this.recentErrors.delete(request.transferId);
    this.recentErrors.set(request.transferId, { url: request.url, datagram, at: now });
    this.events.push({ type: 'refused', transferId: request.transferId, url: request.url, code, message });
  }

  private sendError(request: RequestMessage, code: number, message: string): Uint8Array {
    const datagram = encodeError({ transferId: request.transferId, code, message: clip(message) });
    this.queueControl(datagram);
    this.counters.errorsSent++;
    return datagram;
  }

  private queueControl(datagram: Uint8Array): void {
    if (this.control.length >= this.limits.maxControlQueue) {
      this.control.shift();
      this.counters.controlDropped++;
    }
    this.control.push(datagram);
  }
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** ERROR messages are capped by the wire format; keep the start of a long one. */
function clip(message: string): string {
  return message.length > 200 ? `${message.slice(0, 197)}...` : message;
}

/**
 * META's attributes for a served object, or why it does not answer the REQUEST: a ranged REQUEST
 * needs the bytes it named (a caller's bug otherwise, reported as an internal error).
 */
function attributesFor(request: RequestMessage, object: SourceObject): ObjectAttributes | string {
  const attributes: ObjectAttributes = {};
  if (object.contentType !== undefined && validContentType(object.contentType))
    attributes.contentType = object.contentType;
  if (request.range) {
    if (!object.range) return 'the object was served without its range';
    const problem = servedRangeProblem(request.range, object.range, object.bytes.length);
    if (problem) return `the origin's range does not match the request: ${problem}`;
    attributes.range =
      object.range.completeLength === undefined
        ? { start: object.range.start }
        : { start: object.range.start, completeLength: object.range.completeLength };
  }
  return attributes;
}
