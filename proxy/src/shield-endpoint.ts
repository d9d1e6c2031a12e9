/**
 * The shield parent's endpoint (origin shielding, docs/deploy.md "Origin shielding"): fleet
 * proxies configured with this proxy as their parent ask it for objects they miss, on a port of
 * its own (`--shield-port`, for the fleet's network only), instead of the origin:
 * `GET /v1/shield?url=<encoded>[&start=&length=]` with a MAC under the fleet's shield key
 * (shield-auth.ts). The parent serves through its own cache, so its URL policy (allow-list, SSRF
 * guard, ports) holds for every child request, concurrent requests of one object share one origin
 * fetch, and later ones are cache hits: the origin sends each object about once per parent. A
 * child joining a fetch under way gets its bytes as the origin sends them (shield-stream.ts), not
 * once the parent holds them all. A request that came through this proxy already (parents set up
 * in a loop) or through too many is refused (shield-chain.ts).
 *
 * Bounded: requests under way in all and per child, bytes served per child per minute, a cap on
 * the children tracked; every refusal is a plain status the child answers by fetching from the
 * origin itself. Failures answer fixed texts (the endpoint is no port scanner either). The body
 * carries the parent's bytes only: children take the object's headers (type, cache policy,
 * validators) from the origin directly and check the bytes against it (shield-fetch.ts).
 */
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { asServeError, httpStatus } from './errors';
import type { ProxyMetrics } from './metrics';
import type { ObjectProvider } from './object-source';
import { parseRangeQuery } from './range-query';
import { verifyShieldRequest } from './shield-auth';
import { chainProblem, withShieldChain } from './shield-chain';
import { acceptsStream, hasBytes, objectFields, streamToChild } from './shield-stream';

export interface ShieldEndpointOptions {
  /** The fleet's shield key (children sign with it). */
  key: string;
  /** This proxy's name as a child (shield-auth.ts childLabel): a request that came through it is a loop. */
  self: string;
  objects: ObjectProvider;
  logger: Logger;
  metrics: ProxyMetrics;
  /** Requests under way, all children together. */
  maxConcurrent: number;
  /** Requests under way per child. */
  maxPerChild: number;
  /** Bytes served to one child per minute; past it the child is answered 429 until the minute ends. */
  bytesPerChildPerMinute: number;
  clock?: () => number;
}

/** Children whose budgets are tracked at once (names are only as many as fleet members make up). */
export const MAX_TRACKED_CHILDREN = 4096;
const WINDOW_MS = 60_000;
interface ChildBudget {
  inFlight: number;
  windowStart: number;
  bytes: number;
}

export class ShieldEndpoint {
  private readonly children = new Map<string, ChildBudget>();
  private active = 0;
  private readonly clock: () => number;

  constructor(private readonly options: ShieldEndpointOptions) {
    this.clock = options.clock ?? (() => Date.now());
  }

  /** An HTTP server answering children (listen on the fleet's network). */
  server(): Server {
    const server = createServer((req, res) => {
      this.handle(req, res).catch((e: unknown) => {
        this.options.logger.error({ err: e }, 'shield request failed');
        if (!res.headersSent) answer(res, 500, 'internal');
        else res.destroy();
      });
    });
    server.headersTimeout = 10_000;
    server.keepAliveTimeout = 5_000;
    return server;
  }

  /** Requests being served now (stats). */
  get inFlight(): number {
    return this.active;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { metrics } = this.options;
    const url = new URL(req.url ?? '/', 'http://shield.invalid');
    if (url.pathname !== '/v1/shield') return void answer(res, 404, 'not-found');
    if (req.method !== 'GET') return void answer(res, 405, 'method-not-allowed');
    const target = url.searchParams.get('url');
    const ranged = parseRangeQuery(url.searchParams);
    if (!target || target.length > 8192 || !ranged.ok) return void answer(res, 400, 'bad-request');
    const auth = verifyShieldRequest(this.options.key, req.headers.authorization, {
      url: target,
      range: ranged.range,
    });
    if (!auth.ok) {
      metrics.shieldServed.inc({ outcome: `unauthorized-${auth.reason}` });
      return void answer(res, 401, 'unauthorized');
    }
    // The children the request came through, the asking one last: none may be this proxy.
    const through = [...auth.via, auth.child];
    const loop = chainProblem(this.options.self, through);
    if (loop) {
      metrics.shieldServed.inc({ outcome: 'loop' });
      this.options.logger.warn({ through, problem: loop }, 'shield request refused: parents set up in a loop');
      return void answer(res, 508, 'loop');
    }
    const budget = this.budgetOf(auth.child);
    if (!budget || this.active >= this.options.maxConcurrent || budget.inFlight >= this.options.maxPerChild) {
      metrics.shieldServed.inc({ outcome: 'busy' });
      return void answer(res, 503, 'busy');
    }
    if (budget.bytes >= this.options.bytesPerChildPerMinute) {
      metrics.shieldServed.inc({ outcome: 'over-budget' });
      return void answer(res, 429, 'over-budget');
    }
    this.active++;
    budget.inFlight++;
    // The child leaving withdraws its lookup (the fetch goes on while anyone else waits for it).
    const withdraw = new AbortController();
    const onGone = () => withdraw.abort();
    res.once('close', onGone);
    try {
      // One share of the parent's origin fetches per child (its clients' requests are its own);
      // a fetch this lookup starts asks this proxy's own parent, if any, as part of the chain.
      const got = withShieldChain(through, () =>
        this.options.objects.get(target, withdraw.signal, ranged.range, `shield:${auth.child}`),
      );
      got.catch(() => undefined); // awaited on every path below
      const stream = acceptsStream(req) ? this.options.objects.streaming?.(target, ranged.range) : undefined;
      if (stream && (await hasBytes(stream))) {
        const outcome = await streamToChild(res, stream, got, (bytes) => {
          budget.bytes += bytes;
          metrics.shieldBytes.inc({ source: 'served-to-children' }, bytes);
        });
        metrics.shieldServed.inc({ outcome: outcome === 'streamed' ? 'served' : `stream-${outcome}` });
        return;
      }
      let object;
      try {
        object = await got;
      } catch (e) {
        const kind = asServeError(e).kind;
        metrics.shieldServed.inc({ outcome: kind });
        return void answer(
          res,
          kind === 'timeout' ? 502 : httpStatus(kind),
          kind === 'timeout' ? 'origin-error' : kind,
        );
      }
      budget.bytes += object.bytes.byteLength;
      // The bytes stay the cache's to account for until the child has them, evicted or not.
      const release = object.hold();
      res.once('close', release);
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': object.bytes.byteLength,
        'cache-control': 'no-store',
        ...objectFields(object),
      });
      res.end(object.bytes);
      metrics.shieldServed.inc({ outcome: 'served' });
      metrics.shieldBytes.inc({ source: 'served-to-children' }, object.bytes.byteLength);
    } finally {
      res.off('close', onGone);
      this.active--;
      budget.inFlight--;
    }
  }

  /** The child's budget, its minute renewed; undefined when too many children are tracked. */
  private budgetOf(child: string): ChildBudget | undefined {
    const now = this.clock();
    let budget = this.children.get(child);
    if (budget && now - budget.windowStart >= WINDOW_MS) [budget.windowStart, budget.bytes] = [now, 0];
    if (budget) return budget;
    if (this.children.size >= MAX_TRACKED_CHILDREN) this.forgetIdle(now);
    if (this.children.size >= MAX_TRACKED_CHILDREN) return undefined;
    budget = { inFlight: 0, windowStart: now, bytes: 0 };
    this.children.set(child, budget);
    return budget;
  }

  /** Drops children with nothing under way whose minute is over. */
  private forgetIdle(now: number): void {
    for (const [child, budget] of this.children)
      if (budget.inFlight === 0 && now - budget.windowStart >= WINDOW_MS) this.children.delete(child);
  }
}

function answer(res: ServerResponse, status: number, error: string): void {
  const text = JSON.stringify({ error });
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}
