/**
 * The client's side of one proxy link, sans-IO: the counterpart of the proxy's SourceEndpoint
 * (and of quinn-proto's `Endpoint`). Whatever carries the datagrams (two WebRTC data channels, a
 * QUIC connection's datagrams, the simulator's links) is a transport the host owns; this machine
 * owns what does not depend on it:
 *
 * - every datagram from the proxy is decoded once and routed by transfer id to its transfer (a
 *   Receiver's source); connection-level ERRORs (transfer id 0) and GoingAway are handled here;
 * - liveness is judged once per link (liveness.ts) from what the attached transfers expect;
 * - a transport lost while transfers wait is replaced (reconnection.ts): the host is asked to
 *   connect, attempt by attempt, and the transfers resume on the new transport.
 *
 * The host feeds datagrams, transport events and the time, sends what `pollTransmit` returns on
 * its current transport, acts on `pollEvent` (connect, disconnect, probe the network), and calls
 * `handleTimeout` at `nextDeadline()`.
 */
import { CONNECTION_TRANSFER_ID, decode, ErrorCode, Message, MessageType } from '../wire';
import { DEFAULT_LIVENESS_LIMITS, judgeLiveness, LivenessLimits, TransferLiveness } from './liveness';
import { DEFAULT_RECONNECTION_POLICY, ReconnectionPolicy, ReconnectionSchedule } from './reconnection';

/** One transfer's end of the link: a Receiver's source. */
export interface LinkTransfer {
  /**
   * A message of this transfer from the proxy, decoded; `size` is its length on the wire,
   * `arrivedAt` when it reached the host (≤ now; see handleDatagram).
   */
  handleMessage(message: Message, size: number, now: number, arrivedAt: number): void;
  /** Whether it still expects data from this proxy (only such transfers make a silent link dead). */
  awaiting(): boolean;
  /** A new transport replaced a lost one: the transfer asks again and resumes on it. */
  reconnected(now: number): void;
  /** The link is gone for good: closed, or its reconnection gave up. */
  closed(reason: string, now: number): void;
}

export type LinkState = 'connecting' | 'open' | 'reconnecting' | 'closed';

export type LinkEvent =
  /** Open a new transport now; answer with transportOpened or transportFailed. */
  | { type: 'connect'; attempt: number; timeLeftMs: number }
  /** The current transport is judged dead: close it (a reconnection follows when transfers wait). */
  | { type: 'disconnect'; reason: string }
  /** Ask whether the network answers at all (e.g. origo answers a ping); answer with networkAnswered. */
  | { type: 'probe-network' }
  /** The proxy said it is going away (it drains): transfers under way go on, new ones go elsewhere. */
  | { type: 'going-away'; reason: string }
  | { type: 'closed'; reason: string };

export interface LinkEndpointOptions {
  now: number;
  liveness?: Partial<LivenessLimits>;
  reconnection?: Partial<ReconnectionPolicy>;
  /** Datagrams waiting for the host to send; beyond, the oldest are dropped (receivers repeat). */
  maxQueuedDatagrams?: number;
}

export interface LinkEndpointStats {
  received: number;
  malformed: number;
  /** Datagrams for a transfer not (or no longer) attached. */
  unrouted: number;
  sent: number;
  /** Datagrams dropped because no transport was open or the queue was full. */
  dropped: number;
  /** Transports lost (closed by the host, the proxy, or judged dead). */
  transportsLost: number;
  reconnections: number;
}

interface Attached {
  transfer: LinkTransfer;
  heard: boolean;
  /** First datagram sent for the transfer on the current transport. */
  firstSentAt?: number;
}

/** How often liveness is looked at while transfers are attached (a third of the silence limit). */
const CHECKS_PER_SILENCE = 3;

export class LinkEndpoint {
  private linkState: LinkState = 'connecting';
  private readonly transfers = new Map<number, Attached>();
  private readonly outbox: Uint8Array[] = [];
  private readonly events: LinkEvent[] = [];
  private readonly liveness: LivenessLimits;
  private readonly policy: ReconnectionPolicy;
  private readonly maxQueued: number;
  private openedAt: number;
  private lastHeardAt = -Infinity;
  private nextCheckAt = Infinity;
  /** A network probe was asked for on this transport (once is enough). */
  private probed = false;
  private reconnection?: ReconnectionSchedule;
  /** When the next reconnection attempt is due (Infinity: one is under way or none is planned). */
  private retryAt = Infinity;
  private attemptUnderway = false;
  private goingAwayReason?: string;
  private closedReason?: string;
  private readonly counters: LinkEndpointStats = {
    received: 0,
    malformed: 0,
    unrouted: 0,
    sent: 0,
    dropped: 0,
    transportsLost: 0,
    reconnections: 0,
  };

  constructor(opts: LinkEndpointOptions) {
    this.liveness = { ...DEFAULT_LIVENESS_LIMITS, ...opts.liveness };
    this.policy = { ...DEFAULT_RECONNECTION_POLICY, ...opts.reconnection };
    this.maxQueued = opts.maxQueuedDatagrams ?? 256;
    this.openedAt = opts.now;
  }

  get state(): LinkState {
    return this.linkState;
  }

  /** Why the link closed, once it has. */
  get closeReason(): string | undefined {
    return this.closedReason;
  }

  /** The proxy's reason for going away, once it said so. */
  get goingAway(): string | undefined {
    return this.goingAwayReason;
  }

  get stats(): LinkEndpointStats {
    return { ...this.counters };
  }

  // ---------------------------------------------------------------- transfers

  /** Routes the transfer's datagrams to `transfer` (replacing any earlier one with that id). */
  attach(transferId: number, transfer: LinkTransfer, now: number): void {
    this.transfers.set(transferId >>> 0, { transfer, heard: false });
    this.scheduleCheck(now);
  }

  detach(transferId: number): void {
    this.transfers.delete(transferId >>> 0);
  }

  // ---------------------------------------------------------------- transport events

  /** The host's transport is open (the first one, or a reconnection's). */
  transportOpened(now: number): void {
    if (this.linkState === 'closed') return;
    const reconnected = this.linkState === 'reconnecting';
    this.linkState = 'open';
    this.openedAt = now;
    this.lastHeardAt = -Infinity;
    this.probed = false;
    this.reconnection = undefined;
    this.retryAt = Infinity;
    this.attemptUnderway = false;
    for (const a of this.transfers.values()) a.firstSentAt = undefined;
    this.scheduleCheck(now);
    if (!reconnected) return;
    this.counters.reconnections++;
    for (const a of [...this.transfers.values()]) a.transfer.reconnected(now);
  }

  /** The transport closed or failed under the link (peer closed, channel failed). */
  transportClosed(reason: string, now: number): void {
    if (this.linkState === 'open') this.lose(reason, now, false);
    else if (this.linkState === 'connecting') this.close(reason, now);
    else if (this.linkState === 'reconnecting' && this.attemptUnderway) this.transportFailed(reason, now);
  }

  /**
   * A connection attempt asked for by a `connect` event failed. `retryInMs`: when to try again,
   * when the host knows better than the back-off (e.g. the signalling path is not up yet).
   */
  transportFailed(reason: string, now: number, retryInMs?: number): void {
    if (this.linkState !== 'reconnecting' || !this.reconnection) return;
    this.attemptUnderway = false;
    const stillWanted = [...this.transfers.values()].some((a) => a.transfer.awaiting());
    const at = stillWanted ? this.reconnection.next(now, retryInMs) : undefined;
    if (at === undefined) {
      this.close(`${this.reconnection.reason}; reconnecting failed: ${reason}`, now);
      return;
    }
    this.retryAt = at;
  }

  /** The answer to a `probe-network` event. */
  networkAnswered(answers: boolean, now: number): void {
    if (answers || this.linkState !== 'open') return;
    const verdict = this.verdict(now);
    if (verdict.kind !== 'alive') this.lose(`${verdict.reason}, and the network does not answer`, now, true);
  }

  // ---------------------------------------------------------------- datagrams

  /**
   * A datagram from the proxy. `arrivedAt`: when it reached the host, for a transport that hands
   * datagrams over in batches (QUIC): the transfers' rate estimates need the arrival spacing.
   */
  handleDatagram(bytes: Uint8Array, now: number, arrivedAt = now): void {
    if (this.linkState !== 'open') return;
    this.counters.received++;
    this.lastHeardAt = now;
    const decoded = decode(bytes);
    if (!decoded.ok) {
      this.counters.malformed++;
      return;
    }
    const m = decoded.value;
    if (m.type === MessageType.Error && m.code === ErrorCode.GoingAway) this.noteGoingAway(m.message);
    if (m.transferId === CONNECTION_TRANSFER_ID) return;
    const attached = this.transfers.get(m.transferId);
    if (!attached) {
      this.counters.unrouted++;
      return;
    }
    attached.heard = true;
    attached.transfer.handleMessage(m, bytes.length, now, Math.min(arrivedAt, now));
  }

  /**
   * Queues a datagram for the proxy; false (dropped) when no transport is open. Transfers repeat
   * what matters (requests, feedback), so a datagram lost here is lost as on the network.
   */
  send(bytes: Uint8Array, now: number): boolean {
    if (this.linkState !== 'open') {
      this.counters.dropped++;
      return false;
    }
    // Every MUTP message carries its transfer id at bytes 2..5 (docs/protocol.md §3).
    if (bytes.length >= 6) {
      const id = ((bytes[2] << 24) | (bytes[3] << 16) | (bytes[4] << 8) | bytes[5]) >>> 0;
      const attached = this.transfers.get(id);
      if (attached && attached.firstSentAt === undefined) attached.firstSentAt = now;
    }
    if (this.outbox.length >= this.maxQueued) {
      this.outbox.shift();
      this.counters.dropped++;
    }
    this.outbox.push(bytes);
    return true;
  }

  /** The next datagram to send on the current transport. */
  pollTransmit(): Uint8Array | null {
    const d = this.outbox.shift();
    if (d) this.counters.sent++;
    return d ?? null;
  }

  pollEvent(): LinkEvent | null {
    return this.events.shift() ?? null;
  }

  // ---------------------------------------------------------------- time

  nextDeadline(): number | null {
    if (this.linkState === 'closed') return null;
    const at = Math.min(this.nextCheckAt, this.retryAt);
    return at === Infinity ? null : at;
  }

  handleTimeout(now: number): void {
    if (this.linkState === 'reconnecting' && now >= this.retryAt) this.attempt(now);
    if (this.linkState !== 'open' || now < this.nextCheckAt) return;
    this.nextCheckAt = Infinity;
    const verdict = this.verdict(now);
    if (verdict.kind === 'dead') {
      this.lose(verdict.reason, now, true);
      return;
    }
    if (verdict.kind === 'probe' && !this.probed) {
      this.probed = true;
      this.events.push({ type: 'probe-network' });
    }
    this.scheduleCheck(now);
  }

  /** Closes the link for good; every attached transfer is told. */
  close(reason: string, now: number): void {
    if (this.linkState === 'closed') return;
    this.linkState = 'closed';
    this.closedReason = reason;
    this.outbox.length = 0;
    this.nextCheckAt = Infinity;
    this.retryAt = Infinity;
    this.events.push({ type: 'closed', reason });
    const attached = [...this.transfers.values()];
    this.transfers.clear();
    for (const a of attached) a.transfer.closed(reason, now);
  }

  // ---------------------------------------------------------------- internals

  private verdict(now: number) {
    return judgeLiveness(this.liveness, this.livenessViews(), this.openedAt, this.lastHeardAt, now);
  }

  private *livenessViews(): Iterable<TransferLiveness> {
    for (const a of this.transfers.values())
      yield { awaiting: a.transfer.awaiting(), heard: a.heard, firstSentAt: a.firstSentAt };
  }

  private scheduleCheck(now: number): void {
    if (this.linkState !== 'open' || this.transfers.size === 0) return;
    this.nextCheckAt = Math.min(this.nextCheckAt, now + this.liveness.silentMs / CHECKS_PER_SILENCE);
  }

  /** The transport is gone: reconnect while transfers wait for it, else close. */
  private lose(reason: string, now: number, judged: boolean): void {
    this.counters.transportsLost++;
    this.outbox.length = 0;
    this.nextCheckAt = Infinity;
    if (judged) this.events.push({ type: 'disconnect', reason });
    const waiting = [...this.transfers.values()].some((a) => a.transfer.awaiting());
    if (!this.policy.enabled || !waiting) {
      this.close(reason, now);
      return;
    }
    this.linkState = 'reconnecting';
    this.reconnection = new ReconnectionSchedule(this.policy, now, reason);
    this.attempt(now);
  }

  private attempt(now: number): void {
    const r = this.reconnection!;
    this.retryAt = Infinity;
    this.attemptUnderway = true;
    r.attempts++;
    this.events.push({ type: 'connect', attempt: r.attempts, timeLeftMs: r.remaining(now) });
  }

  private noteGoingAway(message: string): void {
    if (this.goingAwayReason !== undefined) return;
    this.goingAwayReason = message || 'the proxy is going away';
    this.events.push({ type: 'going-away', reason: this.goingAwayReason });
  }
}
