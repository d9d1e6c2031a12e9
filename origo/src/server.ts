/**
 * Origo: the broker service. HTTP (health, metrics, admin) and two WebSocket paths, `/v1/proxy`
 * and `/v1/client`, on fastify + @fastify/websocket. This file is the socket layer: framing,
 * validation, greeting order, per-socket limits; the state and routing live in broker.ts.
 */
import websocket from '@fastify/websocket';
import Fastify, { LogController } from 'fastify';
import pino, { Logger } from 'pino';
import { WebSocket, type RawData } from 'ws';
import {
  ClientToOrigo,
  clientToOrigo,
  downloadRecord,
  MAX_SIGNAL_BYTES,
  OrigoToClient,
  OrigoToProxy,
  parseSignal,
  ProxyToOrigo,
  proxyToOrigo,
  SIGNALLING_VERSION,
  SignalResult,
} from '@mutp/shared';
import { bearerMatches } from './auth';
import { Broker, CLOSE } from './broker';
import { OrigoConfig, OrigoOptions, resolveConfig } from './config';
import { TokenBucket } from './limits';
import { createMetrics, InvalidKind, Metrics } from './metrics';
import { loadProxyKeys, ProxyKeys } from './proxy-auth';
import { DEFAULT_WRITER, RecordWriter } from './record-writer';
import { RecordMode, RecordStore } from './records';
import { TokenIssuer } from './tokens';

export interface Origo {
  readonly config: OrigoConfig;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Starts listening; resolves with the bound port (useful with port 0). */
  listen(): Promise<{ port: number; host: string }>;
  /** Graceful shutdown: stop accepting, close every socket with 1001, close the database. */
  close(): Promise<void>;
  counts(): { proxies: number; clients: number; connections: number };
  /** Re-reads --proxy-keys (SIGHUP): proxies whose key is gone are dropped. */
  reloadProxyKeys(): void;
  /** Writes the queued records now (tests; otherwise a timer does). */
  flushRecords(): void;
}

type Kind = 'proxy' | 'client';
type Outgoing = OrigoToProxy | OrigoToClient;

/** The server side of one WebSocket. */
class Session {
  /** proxyId or clientId once the greeting (register / hello) succeeded. */
  id?: string;
  invalid = 0;
  /** The greeting is being checked (async: token verification); frames meanwhile are refused. */
  greeting = false;
  /** Answered the last ping. */
  alive = true;
  /** origo has closed (or is closing) this socket: later frames are ignored. */
  closed = false;
  greetingTimer?: NodeJS.Timeout;
  readonly bucket: TokenBucket;

  constructor(
    readonly kind: Kind,
    readonly socket: WebSocket,
    readonly address: string,
    readonly remote: string,
    private readonly config: OrigoConfig,
    private readonly onTooSlow: (session: Session) => void,
  ) {
    this.bucket = new TokenBucket(config.messageRatePerSecond, config.messageBurst);
  }

  get label(): string {
    return this.id !== undefined ? `${this.kind}:${this.id}` : `${this.kind}@${this.remote}`;
  }

  send(message: Outgoing): void {
    if (this.socket.readyState !== WebSocket.OPEN) return;
    if (this.socket.bufferedAmount > this.config.maxSocketBufferBytes) {
      // The peer does not read: drop it rather than buffer without bound.
      this.onTooSlow(this);
      return;
    }
    this.socket.send(JSON.stringify(message));
  }

  close(code: number, reason: string): void {
    this.closed = true;
    clearTimeout(this.greetingTimer);
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING) {
      this.socket.close(code, reason);
    }
  }
}

/** How each WebSocket path speaks. */
interface Protocol<In extends { type: string }> {
  kind: Kind;
  greeting: In['type'];
  max: number;
  parse(frame: Uint8Array): SignalResult<In>;
  /** Handles the greeting; returns the session id, or undefined when refused. */
  greet(session: Session, message: In): string | undefined | Promise<string | undefined>;
  message(id: string, message: In): void;
  gone(id: string, session: Session): void;
}

export function createOrigo(options: OrigoOptions): Origo {
  const config = resolveConfig(options);
  const log: Logger = options.logStream
    ? pino({ level: config.logLevel, base: { service: 'origo' } }, options.logStream)
    : pino({ level: config.logLevel, base: { service: 'origo' } });
  const metrics = createMetrics();
  const records = new RecordStore(config.db, config.maxRecords, config.maxRecordBytes, config.dbBusyTimeoutMs);
  const writer = new RecordWriter(records, DEFAULT_WRITER, {
    log,
    stored: metrics.recordsStored,
    shed: metrics.recordsShed,
  });
  const random = options.random ?? (() => (Math.random() * 0x100000000) >>> 0);
  const tokens = new TokenIssuer(config.tokenTtlMs, config.tokenKeyFile);
  let proxyKeys: ProxyKeys | undefined =
    config.proxyKeysFile !== undefined ? loadProxyKeys(config.proxyKeysFile) : undefined;
  if (proxyKeys === undefined) {
    log.warn('insecure dev mode: one shared proxy secret (--insecure-proxy-secret); use --proxy-keys in production');
  }
  const broker = new Broker(config, { log, metrics, records: writer, random, tokens, proxyKeys: () => proxyKeys });

  const sessions = new Set<Session>();
  const bySocket = new WeakMap<WebSocket, Session>();
  /** Sockets per path: all of them, those still greeting (oldest first), and per address. */
  const open: Record<Kind, number> = { proxy: 0, client: 0 };
  const pending: Record<Kind, Set<Session>> = { proxy: new Set(), client: new Set() };
  const perAddress: Record<Kind, Map<string, { open: number; pending: number }>> = {
    proxy: new Map(),
    client: new Map(),
  };
  const addressCount = (kind: Kind, address: string) => {
    let count = perAddress[kind].get(address);
    if (count === undefined) {
      count = { open: 0, pending: 0 };
      perAddress[kind].set(address, count);
    }
    return count;
  };
  const greeted = (session: Session) => {
    if (pending[session.kind].delete(session)) addressCount(session.kind, session.address).pending--;
  };
  let closing = false;
  let closePromise: Promise<void> | undefined;
  let allClosed: (() => void) | undefined;

  // Scrapes and WebSocket upgrades are not logged per request (sockets log their own events).
  const quiet = new Set(['/healthz', '/metrics', '/v1/proxy', '/v1/client', '/v1/keys']);
  const app = Fastify({
    loggerInstance: log,
    logController: new LogController({ disableRequestLogging: (req) => quiet.has(req.url.split('?')[0]) }),
    bodyLimit: 16 * 1024,
  });

  const drop = (session: Session, reason: string, closeCode: number, message: string) => {
    if (session.closed) return;
    metrics.socketsDropped.inc({ reason });
    log.warn({ peer: session.label, reason }, `closing socket: ${message}`);
    if (reason !== 'too-slow') session.send({ type: 'error', code: reason, message });
    session.close(closeCode, reason);
  };

  const invalid = (session: Session, kind: InvalidKind, reason: string) => {
    metrics.invalidMessages.inc({ kind });
    log.warn({ peer: session.label, kind, reason }, 'invalid message');
  };

  function onFrame<In extends { type: string }>(session: Session, data: RawData, p: Protocol<In>): void {
    if (session.closed) return;
    if (!session.bucket.take()) {
      drop(session, 'rate-limited', CLOSE.policy, `more than ${config.messageRatePerSecond} messages/s`);
      return;
    }
    const frame = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    const parsed = p.parse(frame);
    if (!parsed.ok) {
      invalid(session, invalidKind(parsed.error), parsed.error);
      if (session.id === undefined) {
        // A bad greeting ends the session; an unsupported version gets its own code.
        const version = greetingVersion(frame, p.greeting);
        const code = version !== undefined && version !== SIGNALLING_VERSION ? 'unsupported-version' : 'bad-message';
        const message =
          code === 'unsupported-version'
            ? `origo speaks signalling version ${SIGNALLING_VERSION}, not ${version}`
            : truncate(parsed.error);
        if (p.kind === 'proxy') metrics.registrationsRefused.inc({ reason: code });
        session.send({ type: 'error', code, message });
        session.close(CLOSE.protocol, code);
        return;
      }
      session.send({ type: 'error', code: 'bad-message', message: truncate(parsed.error) });
      if (++session.invalid > config.maxInvalidMessages) {
        drop(session, 'too-many-invalid', CLOSE.policy, `more than ${config.maxInvalidMessages} invalid messages`);
      }
      return;
    }
    const message = parsed.value;
    if (session.greeting) {
      // Sent before origo answered the greeting: the peer did not wait for welcome/registered.
      invalid(session, 'unexpected', `${message.type} before the greeting was answered`);
      session.send({ type: 'error', code: 'unexpected-message', message: 'wait for the answer to your greeting' });
      return;
    }
    if (session.id === undefined) {
      if (message.type !== p.greeting) {
        invalid(session, 'unexpected', `${message.type} before ${p.greeting}`);
        if (p.kind === 'proxy') metrics.registrationsRefused.inc({ reason: 'register-required' });
        const code = `${p.greeting}-required`;
        session.send({ type: 'error', code, message: `the first message must be ${p.greeting}` });
        session.close(CLOSE.protocol, code);
        return;
      }
      clearTimeout(session.greetingTimer);
      greeted(session);
      session.greeting = true;
      void new Promise<string | undefined>((resolve) => resolve(p.greet(session, message))).then(
        (id) => {
          session.greeting = false;
          if (id === undefined) return;
          // Closed while the greeting was checked: forget the id the broker just gave it.
          if (session.closed) p.gone(id, session);
          else session.id = id;
        },
        (err: unknown) => {
          session.greeting = false;
          log.error({ err, peer: session.label }, 'greeting failed');
          drop(session, 'internal', CLOSE.tryAgainLater, 'internal error');
        },
      );
      return;
    }
    p.message(session.id, message);
  }

  function attach<In extends { type: string }>(
    socket: WebSocket,
    address: string,
    port: number | undefined,
    p: Protocol<In>,
  ): void {
    const session = new Session(p.kind, socket, address, `${address}:${port}`, config, (s) =>
      drop(s, 'too-slow', CLOSE.policy, `more than ${config.maxSocketBufferBytes} bytes queued`),
    );
    bySocket.set(socket, session);
    if (closing) {
      session.close(CLOSE.goingAway, 'origo shutting down');
      return;
    }
    // Greeted sessions are capped by the broker (max proxies/clients); all sockets by this.
    // Proxy and client paths have separate budgets, so a client flood cannot lock proxies out.
    if (open[p.kind] >= 2 * p.max) {
      drop(session, 'busy', CLOSE.tryAgainLater, `too many ${p.kind} sockets`);
      return;
    }
    const mine = addressCount(p.kind, address);
    if (mine.open >= config.maxSocketsPerAddress || mine.pending >= config.maxPendingPerAddress) {
      if (mine.open === 0) perAddress[p.kind].delete(address);
      drop(session, 'address-limit', CLOSE.tryAgainLater, `too many ${p.kind} sockets from this address`);
      return;
    }
    // Sockets still greeting are few and short-lived; when their budget is full the oldest makes
    // room, so a flood of silent sockets cannot keep a re-registering proxy out.
    if (pending[p.kind].size >= config.maxPendingSockets) {
      const oldest = pending[p.kind].values().next().value!;
      greeted(oldest);
      drop(oldest, 'pending-evicted', CLOSE.tryAgainLater, 'too many sockets greeting: the oldest is closed');
    }
    open[p.kind]++;
    mine.open++;
    mine.pending++;
    pending[p.kind].add(session);
    sessions.add(session);
    session.greetingTimer = setTimeout(
      () => drop(session, 'greeting-timeout', CLOSE.protocol, `no ${p.greeting} within ${config.greetingTimeoutMs} ms`),
      config.greetingTimeoutMs,
    );
    socket.on('message', (data) => onFrame(session, data, p));
    socket.on('pong', () => (session.alive = true));
    socket.on('close', (code, reason) => {
      session.closed = true;
      clearTimeout(session.greetingTimer);
      greeted(session);
      open[p.kind]--;
      const count = addressCount(p.kind, address);
      if (--count.open === 0) perAddress[p.kind].delete(address);
      sessions.delete(session);
      if (session.id !== undefined) p.gone(session.id, session);
      log.debug({ peer: session.label, code, reason: reason.toString() }, 'socket closed');
      if (sessions.size === 0) allClosed?.();
    });
    log.debug({ peer: session.label }, 'socket opened');
  }

  const onSocketError = (error: Error & { code?: string }, socket: WebSocket) => {
    const session = bySocket.get(socket);
    if (error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
      // ws already answers with close 1009: the frame was larger than MAX_SIGNAL_BYTES.
      if (session) invalid(session, 'oversized', `frame larger than ${MAX_SIGNAL_BYTES} bytes`);
      if (session) session.closed = true;
      return;
    }
    log.warn({ peer: session?.label, err: error }, 'socket error');
    if (socket.readyState === WebSocket.OPEN) socket.terminate();
  };

  const proxyProtocol: Protocol<ProxyToOrigo> = {
    kind: 'proxy',
    greeting: 'register',
    max: config.maxProxies,
    parse: (frame) => parseSignal(proxyToOrigo, frame),
    greet: (session, m) => (m.type === 'register' ? broker.register(session, m) : undefined),
    message: (id, m) => broker.proxyMessage(id, m),
    gone: (id, session) => broker.proxyGone(id, session),
  };
  const clientProtocol: Protocol<ClientToOrigo> = {
    kind: 'client',
    greeting: 'hello',
    max: config.maxClients,
    parse: (frame) => parseSignal(clientToOrigo, frame),
    greet: (session, m) => (m.type === 'hello' ? broker.hello(session, m) : undefined),
    message: (id, m) => broker.clientMessage(id, m),
    gone: (id, session) => broker.clientGone(id, session),
  };

  app.register(websocket, {
    options: { maxPayload: MAX_SIGNAL_BYTES },
    errorHandler: (error, socket) => onSocketError(error, socket),
  });
  app.register(async (routes) => {
    routes.get('/v1/proxy', { websocket: true }, (socket, req) =>
      attach(socket, req.ip, req.socket.remotePort, proxyProtocol),
    );
    routes.get('/v1/client', { websocket: true }, (socket, req) =>
      attach(socket, req.ip, req.socket.remotePort, clientProtocol),
    );
    // The key client tokens are signed with (JWKS, RFC 7517), for proxies configured without origo's link.
    routes.get('/v1/keys', async (_req, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return { keys: [tokens.publicJwk] };
    });
    routes.get('/healthz', async (_req, reply) => {
      const { proxies, clients } = broker.counts;
      if (closing) return reply.code(503).send({ status: 'shutting-down', proxies, clients });
      return { status: 'ok', proxies, clients };
    });
    routes.get('/metrics', async (_req, reply) => {
      reply.header('content-type', metrics.registry.contentType);
      return metrics.registry.metrics();
    });
  });

  const adminToken = config.adminToken;
  if (adminToken !== undefined) {
    const modes = downloadRecord.shape.mode.options;
    app.register(async (admin) => {
      admin.addHook('onRequest', async (req, reply) => {
        if (!bearerMatches(req.headers.authorization, adminToken)) {
          return reply.code(401).header('www-authenticate', 'Bearer').send({ error: 'unauthorized' });
        }
      });
      admin.get('/v1/admin/proxies', async () => ({ proxies: broker.listProxies() }));
      admin.get<{ Querystring: { limit: number; mode?: RecordMode } }>(
        '/v1/records',
        {
          schema: {
            querystring: {
              type: 'object',
              properties: {
                limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
                mode: { type: 'string', enum: modes },
              },
              additionalProperties: false,
            },
          },
        },
        async (req, reply) => {
          try {
            return { records: records.recent(req.query.limit, req.query.mode) };
          } catch (err) {
            log.warn({ err }, 'reading records failed');
            return reply.code(503).send({ error: 'database-unavailable' });
          }
        },
      );
    });
  }

  // Liveness of client sockets (proxies also heartbeat): a socket that missed a ping is cut.
  const pingTimer = setInterval(() => {
    for (const session of sessions) {
      if (session.closed) continue;
      if (!session.alive) {
        metrics.socketsDropped.inc({ reason: 'ping-timeout' });
        log.info({ peer: session.label }, 'socket did not answer ping: terminated');
        session.closed = true;
        session.socket.terminate();
        continue;
      }
      session.alive = false;
      session.socket.ping();
    }
  }, config.pingIntervalMs);
  pingTimer.unref();

  return {
    config,
    log,
    metrics,
    counts: () => broker.counts,
    flushRecords: () => writer.flush(),
    reloadProxyKeys() {
      if (config.proxyKeysFile === undefined) return;
      const keys = loadProxyKeys(config.proxyKeysFile);
      proxyKeys = keys;
      broker.revokeMissing(keys);
      log.info({ proxies: keys.size }, 'proxy keys reloaded');
    },
    async listen() {
      await app.listen({ port: config.port, host: config.host });
      const address = app.server.address();
      const port = typeof address === 'object' && address !== null ? address.port : config.port;
      log.info({ host: config.host, port, adminEndpoints: adminToken !== undefined, db: config.db }, 'origo listening');
      return { port, host: config.host };
    },
    close() {
      closePromise ??= (async () => {
        closing = true;
        clearInterval(pingTimer);
        broker.close();
        const closed = new Promise<void>((resolve) => {
          allClosed = resolve;
          if (sessions.size === 0) resolve();
        });
        for (const session of sessions) session.close(CLOSE.goingAway, 'origo shutting down');
        let grace: NodeJS.Timeout | undefined;
        await Promise.race([
          closed,
          new Promise<void>((resolve) => (grace = setTimeout(resolve, config.shutdownGraceMs))),
        ]);
        clearTimeout(grace);
        for (const session of sessions) session.socket.terminate();
        await app.close();
        try {
          writer.close();
        } catch (err) {
          log.warn({ err }, 'final record flush failed');
        }
        records.close();
        log.info('origo closed');
      })();
      return closePromise;
    },
  };
}

/** parseSignal's error text tells which stage failed. */
function invalidKind(error: string): InvalidKind {
  if (error.startsWith('frame of ')) return 'oversized';
  if (error === 'frame is not JSON') return 'json';
  return 'schema';
}

/** The version of a greeting that failed validation, to tell an old peer apart from garbage. */
function greetingVersion(frame: Uint8Array, greeting: string): unknown {
  try {
    const json: unknown = JSON.parse(Buffer.from(frame).toString('utf8'));
    if (typeof json === 'object' && json !== null && (json as { type?: unknown }).type === greeting) {
      return (json as { version?: unknown }).version;
    }
  } catch {
    // not JSON: a plain bad message
  }
  return undefined;
}

function truncate(text: string, max = 512): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
