/**
 * The client's WebSocket session with origo: hello/welcome, asking for proxies, relaying the
 * WebRTC signalling of each proxy connection, and reporting download records.
 */
import {
  ClientToOrigo,
  DownloadRecord,
  IceCandidate,
  MAX_CONFLICT_STATEMENTS,
  Mode,
  origoToClient,
  OrigoToClient,
  parseSignal,
  ProxyInfo,
  SessionDescription,
  SIGNALLING_VERSION,
  StageLayout,
  StagedAnswer,
  failedStage,
  WithdrawReason,
} from '..';
import type { ByteRange } from '../range';
import { ClientError } from './errors';
import { Clock, WebSocketFactory, WebSocketLike, withTimeout } from './host';

export interface ConnectionSignals {
  onDescription(description: SessionDescription): void;
  onCandidate(candidate: IceCandidate): void;
  onClosed(reason: string): void;
}

const OPEN = 1;

/** Undefined when the client may use this origo URL: plain ws:// only to this machine (a man in the middle could inject proxies). */
export function origoUrlProblem(url: string, insecure = false): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `${url} is not a URL`;
  }
  if (parsed.protocol === 'wss:' || insecure) return undefined;
  if (parsed.protocol !== 'ws:') return `${url}: origo is ws:// or wss://`;
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host)) return undefined;
  return `plain ws:// to ${host} is refused: use wss:// (or the insecure option)`;
}

/** Per-proxy tokens kept (the newest offers' proxies). */
const MAX_PROXY_TOKENS = 64;

export class OrigoSession {
  clientId?: string;
  /** origo's signed client token: presented in the next hello (and, from an older origo, to proxies). */
  token?: string;
  tokenExpiresAt?: number;

  private socket?: WebSocketLike;
  private nextRequest = 0;
  private readonly pending = new Map<string, { resolve: (p: ProxyInfo[]) => void; reject: (e: Error) => void }>();
  private readonly connections = new Map<string, ConnectionSignals>();
  /** Staging hints awaiting proxies' answers, by requestId. */
  private readonly stages = new Map<string, StageWait>();
  /** Pings awaiting their pong, by nonce: each settles with whether origo answered. */
  private readonly pings = new Map<string, (answered: boolean) => void>();
  private closed = false;
  /** Called once when the session ends (origo closed the socket, or close()). */
  onClose?: (reason: string) => void;
  /** Origo withdrew a proxy it offered (`withdrawn`): it drains, was reported, or was revoked. */
  onWithdrawn?: (proxyId: string, reason: WithdrawReason) => void;

  constructor(
    readonly url: string,
    private readonly webSocket: WebSocketFactory,
    private readonly clock: Clock,
    private readonly timeoutMs = 10_000,
    /** The token of the previous session: origo keeps our client id (and its limits) when still good. */
    previousToken?: string,
    private readonly insecure = false,
    /**
     * The newest token origo gave for each proxy (offers, renewals), valid at that proxy alone;
     * the client passes the same map to every session, so a link reconnecting after the session
     * changed still has its proxy's renewed token.
     */
    private readonly proxyTokens = new Map<string, string>(),
    /** What this client declares: its MUTP features (hello) and its region hint (each proxy request). */
    private readonly declared: { capabilities?: readonly string[]; region?: string } = {},
  ) {
    this.token = previousToken;
  }

  /**
   * What to present to `proxy` (QUIC admission, the Parallel HTTP endpoint): its own token, never
   * the session token (a proxy holding that could replace this client's session at origo). Only
   * an older origo that gives no per-proxy tokens leaves the session token to present.
   */
  tokenFor(proxy: ProxyInfo): string | undefined {
    return this.proxyTokens.get(proxy.proxyId) ?? proxy.token ?? this.token;
  }

  private rememberProxyToken(proxyId: string, token: string): void {
    // Newest last; the map holds the proxies of the recent offers, not every proxy ever offered.
    this.proxyTokens.delete(proxyId);
    this.proxyTokens.set(proxyId, token);
    if (this.proxyTokens.size > MAX_PROXY_TOKENS) this.proxyTokens.delete(this.proxyTokens.keys().next().value!);
  }

  get isOpen(): boolean {
    return !this.closed && this.socket?.readyState === OPEN && this.clientId !== undefined;
  }

  /** Opens the socket and waits for origo's welcome. */
  connect(): Promise<void> {
    /** The WebSocket handshake completed (what a timeout says: no handshake, or no welcome after it). */
    let opened = false;
    const welcomed = new Promise<void>((resolve, reject) => {
      let socket: WebSocketLike;
      const problem = origoUrlProblem(this.url, this.insecure);
      if (problem !== undefined) {
        reject(new ClientError('origo-unreachable', problem));
        return;
      }
      try {
        socket = this.webSocket(this.url);
      } catch (e) {
        reject(new ClientError('origo-unreachable', `cannot open ${this.url}: ${String(e)}`));
        return;
      }
      this.socket = socket;
      socket.onopen = () => {
        opened = true;
        this.send({
          type: 'hello',
          version: SIGNALLING_VERSION,
          ...(this.token ? { token: this.token } : {}),
          ...(this.declared.capabilities ? { capabilities: [...this.declared.capabilities] } : {}),
        });
      };
      socket.onerror = () => {}; // the close event that follows carries the outcome
      socket.onclose = (event) => {
        const code = `${event.code}${event.reason ? ` ${event.reason}` : ''}`;
        const reason = `origo closed the session (${code})`;
        if (this.clientId === undefined) {
          // Browsers say 1006 for both a refused connection and one cut during the handshake.
          const why = opened ? `closed before the welcome (${code})` : `connection refused or failed (${code})`;
          reject(new ClientError('origo-unreachable', `${this.url}: ${why}`));
        }
        this.shutdown(reason);
      };
      socket.onmessage = (event) => {
        const frame = typeof event.data === 'string' ? event.data : decodeFrame(event.data);
        const parsed = parseSignal(origoToClient, frame ?? '');
        if (!parsed.ok) return; // origo speaks the schema; anything else is ignored, not trusted
        if (parsed.value.type === 'welcome') {
          this.clientId = parsed.value.clientId;
          this.token = parsed.value.token;
          this.tokenExpiresAt = parsed.value.expiresAt;
          resolve();
          return;
        }
        try {
          this.dispatch(parsed.value);
        } catch {
          // One connection's failure (a peer rejecting a description) must not end the session.
        }
      };
    });
    return withTimeout(
      this.clock,
      welcomed,
      this.timeoutMs,
      () =>
        new ClientError(
          'origo-unreachable',
          opened
            ? `no welcome from ${this.url} within ${this.timeoutMs} ms`
            : `${this.url}: handshake timed out (no WebSocket connection within ${this.timeoutMs} ms)`,
        ),
    ).catch((e: unknown) => {
      this.close();
      throw e;
    });
  }

  /** Up to `count` proxies chosen by origo's selection policy, none of `exclude`; origo has `timeoutMs` to answer. */
  requestProxies(count: number, mode: Mode, exclude: string[] = [], timeoutMs = this.timeoutMs): Promise<ProxyInfo[]> {
    if (!this.isOpen) return Promise.reject(new ClientError('origo-unreachable', 'the origo session is closed'));
    const requestId = `r${this.nextRequest++}`;
    const answer = new Promise<ProxyInfo[]>((resolve, reject) => this.pending.set(requestId, { resolve, reject }));
    const region = this.declared.region;
    this.send({
      type: 'request-proxies',
      requestId,
      count,
      mode,
      exclude,
      ...(region !== undefined ? { region } : {}),
    });
    return withTimeout(this.clock, answer, timeoutMs, () => {
      this.pending.delete(requestId);
      const reason = `origo did not answer a proxy request within ${timeoutMs} ms`;
      // A socket that looks open to a silent origo (hung, or cut off without a close) is dead
      // weight: end it, so the next attempt opens a new session (on the next instance, if any).
      this.close(reason);
      return new ClientError('origo-unreachable', reason);
    });
  }

  /**
   * Asks `proxyIds` (offered to this client) through origo to fetch `url` into their caches now
   * (and with `layout`, to prepare its encoder for a REQUEST with that layout).
   * Resolves with one answer per proxy when all have answered or after `timeoutMs`; a proxy that
   * did not answer by then counts as failed ('timeout'). Never rejects: staging is a hint, the
   * download works without it.
   */
  stage(
    url: string,
    proxyIds: readonly string[],
    range?: ByteRange,
    timeoutMs = this.timeoutMs,
    layout?: StageLayout,
  ): Promise<StagedAnswer[]> {
    const requestId = `s${this.nextRequest++}`;
    const ids = [...new Set(proxyIds)];
    const missing = (error: string) =>
      ids.flatMap((proxyId) =>
        wait.answers.has(proxyId) ? [wait.answers.get(proxyId)!] : [failedStage(requestId, proxyId, error)],
      );
    const wait: StageWait = { answers: new Map(), expected: new Set(ids), done: () => undefined };
    if (!this.isOpen || ids.length === 0) return Promise.resolve(missing('no-session'));
    return new Promise<StagedAnswer[]>((resolve) => {
      const cancel = this.clock.setTimer(timeoutMs, () => finish('timeout'));
      const finish = (error: string) => {
        cancel();
        this.stages.delete(requestId);
        resolve(missing(error));
      };
      wait.done = finish;
      this.stages.set(requestId, wait);
      this.send({
        type: 'stage',
        requestId,
        url,
        ...(range ? { range } : {}),
        ...(layout ? { layout } : {}),
        proxyIds: ids,
      });
    });
  }

  /**
   * Whether origo answers a ping within `timeoutMs`: proof that this socket and the path to origo
   * work now. A socket that was open across a disconnection can look open and still hold what it
   * sends for seconds after the network is back (TCP's retransmission back-off).
   */
  ping(timeoutMs: number): Promise<boolean> {
    if (!this.isOpen) return Promise.resolve(false);
    const nonce = `p${this.nextRequest++}`;
    return new Promise<boolean>((resolve) => {
      const cancel = this.clock.setTimer(timeoutMs, () => settle(false));
      const settle = (answered: boolean) => {
        cancel();
        this.pings.delete(nonce);
        resolve(answered);
      };
      this.pings.set(nonce, settle);
      this.send({ type: 'ping', nonce });
    });
  }

  /** Routes the signalling of one proxy connection; returns the functions that send ours. */
  openConnection(proxyId: string, connectionId: string, signals: ConnectionSignals) {
    this.connections.set(connectionId, signals);
    return {
      sendDescription: (description: SessionDescription) =>
        this.send({ type: 'signal', proxyId, connectionId, description }),
      sendCandidate: (candidate: IceCandidate) => this.send({ type: 'signal', proxyId, connectionId, candidate }),
      close: (reason: string) => {
        if (this.connections.delete(connectionId)) this.send({ type: 'connection-closed', connectionId, reason });
      },
    };
  }

  sendRecord(record: DownloadRecord): void {
    this.send({ type: 'record', record });
  }

  /** Reports a proxy this client excluded as a polluter (origo stops offering it on enough reports). */
  sendReport(proxyId: string, kind: 'meta' | 'digests' | 'data'): void {
    this.send({ type: 'report', proxyId, kind });
  }

  /**
   * Hands origo the signed METAs of a download whose sources disagreed (at most
   * MAX_CONFLICT_STATEMENTS, one per identity first): origo judges them against the origin.
   */
  sendConflict(url: string, range: ByteRange | undefined, statements: { proxyId: string; meta: Uint8Array }[]): void {
    this.send({
      type: 'conflict',
      url,
      ...(range ? { range } : {}),
      statements: statements
        .slice(0, MAX_CONFLICT_STATEMENTS)
        .map((s) => ({ proxyId: s.proxyId, meta: toBase64(s.meta) })),
    });
  }

  close(reason = 'closed by the client'): void {
    this.shutdown(reason);
    const socket = this.socket;
    if (socket && socket.readyState <= OPEN) socket.close(1000, 'bye');
  }

  private dispatch(m: OrigoToClient): void {
    switch (m.type) {
      case 'proxies': {
        const waiter = this.pending.get(m.requestId);
        this.pending.delete(m.requestId);
        for (const p of m.proxies) if (p.token !== undefined) this.rememberProxyToken(p.proxyId, p.token);
        waiter?.resolve(m.proxies);
        break;
      }
      case 'staged': {
        const wait = this.stages.get(m.requestId);
        if (wait === undefined || !wait.expected.has(m.proxyId)) break;
        wait.answers.set(m.proxyId, m);
        if (wait.answers.size === wait.expected.size) wait.done('');
        break;
      }
      case 'pong':
        this.pings.get(m.nonce)?.(true);
        break;
      case 'withdrawn':
        this.onWithdrawn?.(m.proxyId, m.reason);
        break;
      case 'token':
        this.token = m.token;
        this.tokenExpiresAt = m.expiresAt;
        for (const p of m.proxyTokens ?? []) this.rememberProxyToken(p.proxyId, p.token);
        break;
      case 'signal': {
        const connection = this.connections.get(m.connectionId);
        if (m.description) connection?.onDescription(m.description);
        if (m.candidate) connection?.onCandidate(m.candidate);
        break;
      }
      case 'connection-closed': {
        const connection = this.connections.get(m.connectionId);
        this.connections.delete(m.connectionId);
        connection?.onClosed(m.reason);
        break;
      }
      case 'error': {
        const waiter = m.requestId !== undefined ? this.pending.get(m.requestId) : undefined;
        if (waiter && m.requestId !== undefined) {
          this.pending.delete(m.requestId);
          waiter.reject(new ClientError('origo-error', `origo: ${m.code}: ${m.message}`));
        }
        break;
      }
    }
  }

  private send(m: ClientToOrigo): void {
    const socket = this.socket;
    if (socket && socket.readyState === OPEN) socket.send(JSON.stringify(m));
  }

  private shutdown(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const waiter of this.pending.values()) waiter.reject(new ClientError('origo-unreachable', reason));
    this.pending.clear();
    for (const wait of [...this.stages.values()]) wait.done('session-closed');
    for (const settle of [...this.pings.values()]) settle(false);
    const connections = [...this.connections.values()];
    this.connections.clear();
    for (const c of connections) c.onClosed(reason);
    this.onClose?.(reason);
  }
}

interface StageWait {
  answers: Map<string, StagedAnswer>;
  expected: Set<string>;
  /** Resolves the hint's promise; proxies without an answer are failed with `error`. */
  done(error: string): void;
}

function decodeFrame(data: unknown): string | undefined {
  if (data instanceof Uint8Array) return new TextDecoder().decode(data);
  if (data instanceof ArrayBuffer) return new TextDecoder().decode(new Uint8Array(data));
  return undefined;
}

/** Standard base64 (btoa: browsers and Node alike). */
function toBase64(bytes: Uint8Array): string {
  let text = '';
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text);
}
