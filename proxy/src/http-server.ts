/**
 * The proxy's HTTP endpoint: `GET /v1/http?url=` (Parallel HTTP baseline; needs a client token,
 * `OPTIONS` answers its CORS preflight), `GET /livez` (200 while the process and its event loop
 * run), `GET /readyz` (200 when registered with origo and not draining, else 503 with the reason),
 * `GET /healthz` (200 + JSON stats) and `GET /metrics` (Prometheus text). The last two need
 * `metricsToken` as a bearer token, or come from a loopback peer when the proxy has none: the
 * public port serves clients, and its operator's monitoring is not theirs to read.
 */
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { isLoopbackHost, secretsEqual } from '@mutp/cli-options';
import { bearerToken } from './client-tokens';
import { HttpBaselineDeps, sendJson, serveHttpBaseline, servePreflight } from './http-baseline';

/** Whether the proxy should be sent clients now (load balancers, orchestrators), and why not. */
export type Readiness = { ready: true } | { ready: false; reason: string; [detail: string]: unknown };

export interface HttpServerDeps extends HttpBaselineDeps {
  logger: Logger;
  /** Bearer token of /healthz and /metrics; absent: loopback peers only. */
  metricsToken?: string;
  health: () => unknown;
  readiness: () => Readiness;
}

export function createHttpServer(deps: HttpServerDeps): Server {
  const server = createServer((req, res) => {
    route(deps, req, res).catch((e: unknown) => {
      deps.logger.error({ err: e }, 'HTTP handler failed');
      if (!res.headersSent) sendJson(res, 500, { error: 'internal', message: 'internal error' });
      else res.destroy();
    });
  });
  // Bounded: slow or idle clients do not hold sockets for ever.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 5_000;
  return server;
}

async function route(deps: HttpServerDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://proxy.invalid');
  const name = ROUTES.has(url.pathname) ? url.pathname : 'other';
  let status: number;
  if (req.method === 'OPTIONS' && url.pathname === '/v1/http') {
    status = servePreflight(deps, req, res);
  } else if (req.method !== 'GET' || !ROUTES.has(url.pathname)) {
    status = ROUTES.has(url.pathname) ? 405 : 404;
    sendJson(res, status, { error: status === 405 ? 'method-not-allowed' : 'not-found' });
  } else if (url.pathname === '/v1/http') {
    status = await serveHttpBaseline(deps, req, res, url.searchParams);
  } else if (url.pathname === '/livez') {
    status = 200;
    sendJson(res, 200, { status: 'alive' });
  } else if (url.pathname === '/readyz') {
    const { ready, ...why } = deps.readiness();
    status = ready ? 200 : 503;
    sendJson(res, status, ready ? { status: 'ready' } : { status: 'not-ready', ...why });
  } else if (!monitoringAllowed(deps, req)) {
    status = deps.metricsToken === undefined ? 403 : 401;
    const headers = status === 401 ? { 'www-authenticate': 'Bearer realm="mutp-metrics"' } : undefined;
    sendJson(res, status, { error: status === 401 ? 'unauthorized' : 'forbidden' }, headers);
  } else if (url.pathname === '/healthz') {
    status = 200;
    sendJson(res, 200, deps.health());
  } else {
    status = 200;
    const text = await deps.metrics.registry.metrics();
    res.writeHead(200, { 'content-type': deps.metrics.registry.contentType, 'cache-control': 'no-store' });
    res.end(text);
  }
  deps.metrics.httpRequests.inc({ route: name, status: String(status) });
}

const ROUTES = new Set(['/v1/http', '/livez', '/readyz', '/healthz', '/metrics']);

/** /healthz and /metrics: the operator's token, or a loopback peer when the proxy has no token. */
export function monitoringAllowed(deps: HttpServerDeps, req: IncomingMessage): boolean {
  if (deps.metricsToken !== undefined) {
    const presented = bearerToken(req.headers.authorization);
    return presented !== undefined && secretsEqual(presented, deps.metricsToken);
  }
  return isLoopbackHost(req.socket.remoteAddress ?? '');
}
