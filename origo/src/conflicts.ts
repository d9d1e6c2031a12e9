/**
 * Conflict verdicts (issue 31, evidence). A client whose download failed because proxies signed
 * different identities for one URL and range hands origo their signed METAs (`conflict`). Origo
 * checks each signature against the key the proxy registered with, fetches the object from the
 * origin itself (through the same SSRF guard as the proxies, @mutp/origin-fetch) and compares.
 *
 * A statement is **proven false** only when the origin contradicts it on its own terms: it names
 * the validator the origin now sends (a strong ETag, else Last-Modified) but not the bytes the
 * origin sends under it, and another signed statement with that same validator does match those
 * bytes (so the origin is consistent, not one that serves different bytes under one validator).
 * A statement with another validator, or none, is inconclusive: the origin may have changed since
 * the proxy fetched, and nobody can prove what it served then (the origin signs nothing). A
 * count of conflicts decides nothing.
 *
 * Cost, bounded for an anonymous client: statements must be signed by registered proxies that
 * origo offered this client; each client network gets `perNetwork` verdicts per `windowMs`; at
 * most `maxConcurrent` origin fetches run at once, each at most `maxBytes` and
 * `originTimeoutMs`; one fetch per URL and range serves every conflict about it for `reuseMs`.
 */
import { createHash } from 'node:crypto';
import { ByteRange, MetaMessage, OriginValidator, sameIdentity } from '@mutp/shared';

/** A signed META whose signature origo checked, with the proxy that signed it. */
export interface Statement {
  proxyId: string;
  meta: MetaMessage;
}

export type StatementResult = 'matches-origin' | 'proven-false' | 'inconclusive';

export type Verdict =
  | { outcome: 'judged'; results: { proxyId: string; result: StatementResult }[] }
  /** Fewer than two signed identities: nothing to judge. */
  | { outcome: 'no-conflict' }
  /** Over a budget (the network's, or origo's concurrency). */
  | { outcome: 'refused'; reason: string }
  | { outcome: 'origin-failed'; reason: string };

/** What origo got from the origin (the bytes of the range, when one was asked for). */
export interface OriginAnswer {
  bytes: Uint8Array;
  etag?: string;
  lastModified?: string;
}

export type OriginFetcher = (url: string, range: ByteRange | undefined, maxBytes: number) => Promise<OriginAnswer>;

export interface ConflictPolicy {
  perNetwork: number;
  windowMs: number;
  maxConcurrent: number;
  maxBytes: number;
  /** One origin answer serves every conflict about the same URL and range for this long. */
  reuseMs: number;
  /** Networks whose budgets are remembered at once (the oldest are forgotten first). */
  maxNetworks: number;
}

export const DEFAULT_CONFLICT_POLICY: ConflictPolicy = {
  perNetwork: 6,
  windowMs: 10 * 60_000,
  maxConcurrent: 2,
  maxBytes: 64 * 1024 * 1024,
  reuseMs: 60_000,
  maxNetworks: 10_000,
};

/** Origin answers kept for reuse at most (each holds only a digest, not the bytes). */
const MAX_REUSED = 1024;

interface Judged {
  at: number;
  answer: Promise<{ length: number; digest: Uint8Array; validator?: OriginValidator }>;
}

export class ConflictJudge {
  private readonly spent = new Map<string, number[]>();
  private readonly reused = new Map<string, Judged>();
  private running = 0;

  constructor(
    private readonly fetchOrigin: OriginFetcher,
    private readonly now: () => number,
    readonly policy: ConflictPolicy = DEFAULT_CONFLICT_POLICY,
  ) {}

  async judge(network: string, url: string, range: ByteRange | undefined, statements: Statement[]): Promise<Verdict> {
    if (distinctIdentities(statements) < 2) return { outcome: 'no-conflict' };
    const key = `${url}\n${range ? `${range.start}+${range.length}` : ''}`;
    let judged = this.reused.get(key);
    if (!judged || this.now() - judged.at > this.policy.reuseMs) {
      const refusal = this.charge(network);
      if (refusal) return { outcome: 'refused', reason: refusal };
      const maxBytes = Math.min(this.policy.maxBytes, Math.max(...statements.map((s) => s.meta.objectLength)));
      judged = { at: this.now(), answer: this.fetchOnce(url, range, maxBytes) };
      this.reused.delete(key);
      this.reused.set(key, judged);
      if (this.reused.size > MAX_REUSED) this.reused.delete(this.reused.keys().next().value!);
    }
    let origin: Awaited<Judged['answer']>;
    try {
      origin = await judged.answer;
    } catch (e) {
      return { outcome: 'origin-failed', reason: e instanceof Error ? e.message : String(e) };
    }
    const matches = (s: Statement) =>
      s.meta.objectLength === origin.length && Buffer.from(s.meta.digest).equals(origin.digest);
    const current = (s: Statement) =>
      origin.validator !== undefined && sameValidator(s.meta.signed?.validator, origin.validator);
    const results = statements.map((s) => {
      if (matches(s)) return { proxyId: s.proxyId, result: 'matches-origin' as const };
      const contradicted = current(s) && statements.some((o) => o !== s && matches(o) && current(o));
      return { proxyId: s.proxyId, result: contradicted ? ('proven-false' as const) : ('inconclusive' as const) };
    });
    return { outcome: 'judged', results };
  }

  /** Why the network may not have another verdict now, or undefined (and it is counted). */
  private charge(network: string): string | undefined {
    if (this.running >= this.policy.maxConcurrent) return 'origo is judging as many conflicts as it may at once';
    const now = this.now();
    const times = (this.spent.get(network) ?? []).filter((t) => now - t < this.policy.windowMs);
    if (times.length >= this.policy.perNetwork) return `${this.policy.perNetwork} verdicts per network per window`;
    times.push(now);
    this.spent.delete(network);
    this.spent.set(network, times);
    if (this.spent.size > this.policy.maxNetworks) this.spent.delete(this.spent.keys().next().value!);
    return undefined;
  }

  private async fetchOnce(
    url: string,
    range: ByteRange | undefined,
    maxBytes: number,
  ): Promise<Awaited<Judged['answer']>> {
    this.running++;
    try {
      const answer = await this.fetchOrigin(url, range, maxBytes);
      return {
        length: answer.bytes.length,
        digest: new Uint8Array(createHash('sha256').update(answer.bytes).digest()),
        validator: validatorOf(answer),
      };
    } finally {
      this.running--;
    }
  }
}

/** The origin's validator as a signed META names it: a strong ETag first, else Last-Modified. */
export function validatorOf(answer: { etag?: string; lastModified?: string }): OriginValidator | undefined {
  if (answer.etag !== undefined && !answer.etag.startsWith('W/')) return { kind: 'etag', value: answer.etag };
  if (answer.lastModified !== undefined) return { kind: 'last-modified', value: answer.lastModified };
  return undefined;
}

function sameValidator(a: OriginValidator | undefined, b: OriginValidator): boolean {
  return a !== undefined && a.kind === b.kind && a.value === b.value;
}

function distinctIdentities(statements: Statement[]): number {
  const distinct: MetaMessage[] = [];
  for (const { meta } of statements) if (!distinct.some((d) => sameIdentity(d, meta))) distinct.push(meta);
  return distinct.length;
}
