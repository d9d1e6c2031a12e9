/**
 * origo's HTTP side on fastify: the two WebSocket endpoints (each upgraded socket is handed to the
 * session layer), the JWKS at /v1/keys, /livez, /readyz, /healthz, /metrics and, with an admin
 * token, the admin endpoints. Nothing here keeps per-socket state.
 */
import websocket from '@fastify/websocket';
import Fastify, { FastifyPluginAsync, LogController } from 'fastify';
import { Logger } from 'pino';
import { isLoopbackHost } from '@mutp/cli-options';
import { downloadRecord, MAX_SIGNAL_BYTES } from '@mutp/shared';
import { bearerMatches } from './auth';
import { Broker } from './broker/router';
import { OrigoConfig } from './config';
import { Metrics } from './metrics';
import type { RecordBackend } from './records/record-backend';
import { RecordMode } from './records/records';
import { Sessions } from './sessions/sessions';
import { TokenIssuer } from './tokens';

export interface RouteDeps {
  config: OrigoConfig;
  log: Logger;
  metrics: Metrics;
  broker: Broker;
  sessions: Sessions;
  records: RecordBackend;
  tokens: TokenIssuer;
}

// Scrapes and WebSocket upgrades are not logged per request (sockets log their own events).
const QUIET = new Set(['/livez', '/readyz', '/healthz', '/metrics', '/v1/proxy', '/v1/client', '/v1/keys']);

export function createHttpApp(deps: RouteDeps) {
  const { broker, sessions, metrics, tokens } = deps;
  const app = Fastify({
    loggerInstance: deps.log,
    logController: new LogController({ disableRequestLogging: (req) => QUIET.has(req.url.split('?')[0]) }),
    bodyLimit: 16 * 1024,
    // Only the listed reverse proxies may name the client (req.ip); anyone else's header is ignored.
    ...(deps.config.trustProxy.length > 0 ? { trustProxy: deps.config.trustProxy } : {}),
  });

  let recordsProblem: string | undefined = 'records-store-opening';
  deps.records.ready.then(
    () => (recordsProblem = undefined),
    () => (recordsProblem = 'records-store-failed'),
  );

  app.register(websocket, {
    options: { maxPayload: MAX_SIGNAL_BYTES },
    errorHandler: (error, socket) => sessions.onSocketError(error, socket),
  });
  app.register(async (routes) => {
    routes.get('/v1/proxy', { websocket: true }, (socket, req) =>
      sessions.attachProxy(socket, req.ip, req.socket.remotePort),
    );
    routes.get('/v1/client', { websocket: true }, (socket, req) =>
      sessions.attachClient(socket, req.ip, req.socket.remotePort),
    );
    // The key client tokens are signed with (JWKS, RFC 7517), for proxies configured without origo's link.
    routes.get('/v1/keys', async (_req, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return { keys: [tokens.publicJwk] };
    });
    // Liveness: answering at all means the process and its event loop run.
    routes.get('/livez', async () => ({ status: 'alive' }));
    // Readiness: 503 from the moment shutdown starts (sockets are refused from then on), and
    // until the records store has opened.
    routes.get('/readyz', async (_req, reply) => {
      const reason = sessions.closing ? 'shutting-down' : recordsProblem;
      if (reason !== undefined) return reply.code(503).send({ status: 'not-ready', reason });
      return { status: 'ready' };
    });
    routes.get('/healthz', async (_req, reply) => {
      const { proxies, clients } = broker.counts;
      if (sessions.closing) return reply.code(503).send({ status: 'shutting-down', proxies, clients });
      return { status: 'ok', proxies, clients };
    });
    // The operator's monitoring, not the public's: the metrics token, or a loopback client (req.ip:
    // behind a listed reverse proxy that is the real client, not the proxy).
    routes.get('/metrics', async (req, reply) => {
      const token = deps.config.metricsToken;
      if (token !== undefined ? !bearerMatches(req.headers.authorization, token) : !isLoopbackHost(req.ip)) {
        if (token === undefined) return reply.code(403).send({ error: 'forbidden' });
        return reply.code(401).header('www-authenticate', 'Bearer').send({ error: 'unauthorized' });
      }
      reply.header('content-type', metrics.registry.contentType);
      return metrics.registry.metrics();
    });
  });
  if (deps.config.adminToken !== undefined) app.register(adminRoutes(deps.config.adminToken, deps));
  return app;
}

/** /v1/admin/proxies and /v1/records, behind the admin bearer token. */
function adminRoutes(adminToken: string, { broker, records, log }: RouteDeps): FastifyPluginAsync {
  const modes = downloadRecord.shape.mode.options;
  return async (admin) => {
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
          return { records: await records.recent(req.query.limit, req.query.mode) };
        } catch (err) {
          // Bounded by the store's own timeouts (SQLite's busy timeout, PostgreSQL's connect and
          // statement timeouts): a store that is down or hung answers 503, never a hang.
          log.warn({ err }, 'reading records failed');
          return reply
            .code(503)
            .send({ error: 'database-unavailable', message: 'the records database is unavailable; try again later' });
        }
      },
    );
  };
}
