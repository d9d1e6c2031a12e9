/**
 * Where a client's `conflict` arrives (conflicts.ts judges it): each statement must be a proxy's
 * signed META about the URL and range the client names, from a proxy origo offered this client,
 * signed by the key that proxy registered with. Statements that are not are dropped unread (they
 * prove nothing about anyone); what is left is judged against the origin, and a proxy whose signed
 * statement the origin contradicts is withdrawn (`proven-false`). Signatures are checked with the
 * portable verifier (about 1 ms each, at most 4 per conflict, conflicts budgeted per network).
 */
import type { Logger } from 'pino';
import { ConflictReport, decode, decodeAssertionKey, MessageType, OrigoToProxy, verifyMeta } from '@mutp/shared';
import { ConflictJudge, Statement, Verdict } from '../conflicts';
import { Metrics } from '../metrics';

export interface ConflictDeskDeps {
  judge: ConflictJudge;
  log: Logger;
  metrics: Metrics;
  /** The assertion key a proxy registered with (local or on another instance), if any. */
  assertionKeyOf: (proxyId: string) => string | undefined;
  /** Whether origo offered `proxyId` to this client (only those it may speak about). */
  wasOffered: (clientId: string, proxyId: string) => boolean;
  /** A proxy's signed statement was proven false against the origin. */
  provenFalse: (proxyId: string, url: string) => void;
  /** The version a proxy stated is not what the origin serves now: it should drop it (`stale`). */
  stale: (proxyId: string, m: Extract<OrigoToProxy, { type: 'stale' }>) => void;
}

export class ConflictDesk {
  constructor(private readonly deps: ConflictDeskDeps) {}

  /** Judges a client's conflict in the background; never throws. */
  handle(client: { clientId: string; network: string }, m: ConflictReport): void {
    const statements = this.verified(client.clientId, m);
    this.deps.judge
      .judge(client.network, m.url, m.range, statements)
      .then((verdict) => this.act(client.clientId, m, statements, verdict))
      .catch((err: unknown) => this.deps.log.error({ err }, 'conflict verdict failed'));
  }

  private verified(clientId: string, m: ConflictReport): Statement[] {
    const request = { url: m.url, ...(m.range ? { range: m.range } : {}) };
    const out: Statement[] = [];
    for (const s of m.statements) {
      if (!this.deps.wasOffered(clientId, s.proxyId)) continue;
      const key = this.deps.assertionKeyOf(s.proxyId);
      const publicKey = key === undefined ? undefined : decodeAssertionKey(key);
      const decoded = decode(new Uint8Array(Buffer.from(s.meta, 'base64')));
      if (!publicKey || !decoded.ok || decoded.value.type !== MessageType.Meta) continue;
      if (verifyMeta(decoded.value, request, s.proxyId, publicKey))
        out.push({ proxyId: s.proxyId, meta: decoded.value });
    }
    return out;
  }

  private act(clientId: string, m: ConflictReport, statements: Statement[], verdict: Verdict): void {
    const signed = statements.length;
    this.deps.metrics.conflictVerdicts.inc({ outcome: verdict.outcome });
    // The URL without its query (signed CDN tokens stay out of logs).
    const fields = { clientId, url: m.url.split('?')[0], statements: m.statements.length, signed, ...verdict };
    if (verdict.outcome !== 'judged') {
      this.deps.log.info(fields, 'conflict not judged');
      return;
    }
    for (const r of verdict.results) this.deps.metrics.conflictStatements.inc({ result: r.result });
    const proven = verdict.results.filter((r) => r.result === 'proven-false');
    (proven.length > 0 ? this.deps.log.warn : this.deps.log.info).call(this.deps.log, fields, 'conflict judged');
    for (const r of proven) this.deps.provenFalse(r.proxyId, m.url);
    // Whoever stated other bytes than the origin serves now holds an old version (or lied): either
    // way its copy goes, so a changed object stops failing downloads before its freshness ends.
    // Bounded by the verdict budget, and only copies origo saw differ are dropped.
    for (const r of verdict.results) {
      if (r.result === 'matches-origin') continue;
      const meta = statements.find((s) => s.proxyId === r.proxyId)?.meta;
      if (!meta) continue;
      this.deps.stale(r.proxyId, {
        type: 'stale',
        url: m.url,
        ...(m.range ? { range: m.range } : {}),
        digest: Buffer.from(meta.digest).toString('hex'),
      });
    }
  }
}
