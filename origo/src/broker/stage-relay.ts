/**
 * Staging hints (SoftStage, docs/signalling.md "Staging hints"): a client asks proxies origo
 * offered it to fetch an object into their caches before it asks for the object; each proxy's
 * outcome comes back to the client as a `staged` message.
 *
 * A hint costs the client nothing and a proxy an origin fetch, so origo is where it is paid for:
 * each proxy a hint names takes a token from the client's budget and from its network's (IPv4 /24,
 * IPv6 /48: addresses inside one are free to whoever holds it), and a
 * hint may only name proxies origo offered this client. Proxies keep no client state; origo keeps
 * one small entry per forwarded hint (on the instance owning the proxy's socket) until the answer
 * or stageTimeoutMs, so a proxy can only answer hints it was sent, to the client that sent them.
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { ClientToOrigo, failedStage, StagedAnswer, StagedByProxy, StageHint } from '@mutp/shared';
import type { Cluster } from '../cluster/cluster';
import type { OrigoConfig } from '../config';
import { BudgetBook } from '../limits';
import type { Metrics } from '../metrics';
import type { ClientPeer, ProxyPeer } from './peers';

type ClientStage = Extract<ClientToOrigo, { type: 'stage' }>;

/** Hints awaiting a proxy's answer, across every client of the instance (beyond it the oldest is forgotten). */
const MAX_PENDING_HINTS = 100_000;

export interface StageRelayDeps {
  config: Pick<
    OrigoConfig,
    'stageRatePerSecond' | 'stageBurst' | 'stageRatePerAddress' | 'stageBurstPerAddress' | 'stageTimeoutMs'
  >;
  metrics: Metrics;
  log: Logger;
  cluster: Cluster;
  /** The socket of a proxy this instance owns. */
  localProxy(proxyId: string): ProxyPeer | undefined;
  /** The instance owning a proxy registered elsewhere, as last read. */
  remoteInstance(proxyId: string): string | undefined;
  /** The socket of a client this instance owns. */
  localClient(clientId: string): ClientPeer | undefined;
}

/** Who sent the hint a proxy is working on: the client's instance, undefined when it is this one. */
interface PendingHint {
  clientInstance?: string;
}

/** What origo knows of the client sending a hint. */
export interface HintSender {
  clientId: string;
  peer: ClientPeer;
  /** Its network (IPv4 /24, IPv6 /48), which its staging budget and the proxy's shares count. */
  network: string;
  /** Proxies origo offered this client. */
  offered: ReadonlySet<string>;
}

export class StageRelay {
  private readonly budgets = new BudgetBook();
  private readonly pending: LRUCache<string, PendingHint>;

  constructor(private readonly deps: StageRelayDeps) {
    this.pending = new LRUCache<string, PendingHint>({
      max: MAX_PENDING_HINTS,
      ttl: deps.config.stageTimeoutMs,
      dispose: (_value, _key, reason) => {
        if (reason === 'evict' || reason === 'expire') this.deps.metrics.stageHints.inc({ outcome: 'expired' });
      },
    });
  }

  /** A client's hint: each proxy it names is checked, paid for and asked (or answered 'failed' at once). */
  fromClient(client: HintSender, m: ClientStage): void {
    const { config } = this.deps;
    const hint: StageHint = {
      type: 'stage',
      clientId: client.clientId,
      clientNetwork: client.network,
      requestId: m.requestId,
      url: m.url,
      ...(m.range ? { range: m.range } : {}),
      ...(m.layout ? { layout: m.layout } : {}),
    };
    for (const proxyId of new Set(m.proxyIds)) {
      const fail = (error: string) => this.answerHere(client.peer, failedStage(m.requestId, proxyId, error));
      if (!client.offered.has(proxyId)) {
        fail('not-offered');
        continue;
      }
      if (
        !this.budgets.take(`c:${client.clientId}`, config.stageRatePerSecond, config.stageBurst) ||
        !this.budgets.take(`n:${hint.clientNetwork}`, config.stageRatePerAddress, config.stageBurstPerAddress)
      ) {
        fail('rate-limited');
        continue;
      }
      const peer = this.deps.localProxy(proxyId);
      if (peer !== undefined) {
        this.forward(peer, proxyId, hint, undefined);
        continue;
      }
      const instance = this.deps.remoteInstance(proxyId);
      if (instance === undefined) {
        fail('unknown-proxy');
        continue;
      }
      const sent = this.deps.cluster.send(instance, {
        kind: 'stage',
        from: this.deps.cluster.instanceId,
        proxyId,
        message: hint,
      });
      if (sent) this.deps.metrics.stageHints.inc({ outcome: 'forwarded' });
      else fail('relay-unavailable');
    }
  }

  /** A hint another instance forwarded for a proxy of this one (that instance paid for it). */
  fromInstance(from: string, proxyId: string, hint: StageHint): void {
    const peer = this.deps.localProxy(proxyId);
    if (peer !== undefined) return this.forward(peer, proxyId, hint, from);
    // Gone or moved since the client's instance read the registry: its client learns it.
    this.deps.cluster.send(from, {
      kind: 'staged',
      from: this.deps.cluster.instanceId,
      clientId: hint.clientId,
      message: failedStage(hint.requestId, proxyId, 'unknown-proxy'),
    });
  }

  /** A proxy's answer: delivered to the client that sent the hint, if it did; dropped otherwise. */
  fromProxy(proxyId: string, m: StagedByProxy): void {
    const key = pendingKey(m.clientId, m.requestId, proxyId);
    const hint = this.pending.get(key);
    if (hint === undefined) {
      // Late (past stageTimeoutMs) or never asked: a proxy cannot message clients at will.
      this.deps.log.debug(
        { proxyId, clientId: m.clientId, requestId: m.requestId },
        'unsolicited staged answer dropped',
      );
      return;
    }
    this.pending.delete(key);
    this.deps.metrics.stageHints.inc({ outcome: m.status });
    const answer: StagedAnswer = {
      type: 'staged',
      requestId: m.requestId,
      proxyId,
      status: m.status,
      originMs: m.originMs,
      cached: m.cached,
      bytes: m.bytes,
      ...(m.error !== undefined ? { error: m.error } : {}),
      ...(m.prepared !== undefined ? { prepared: m.prepared } : {}),
    };
    if (hint.clientInstance === undefined) {
      this.deps.localClient(m.clientId)?.send(answer);
    } else {
      this.deps.cluster.send(hint.clientInstance, {
        kind: 'staged',
        from: this.deps.cluster.instanceId,
        clientId: m.clientId,
        message: answer,
      });
    }
  }

  /** An answer relayed by the instance owning the proxy, for a client of this one. */
  fromInstanceStaged(clientId: string, answer: StagedAnswer): void {
    this.deps.localClient(clientId)?.send(answer);
  }

  private forward(peer: ProxyPeer, proxyId: string, hint: StageHint, clientInstance: string | undefined): void {
    // Deleted first: the dispose hook must not count a replaced entry as expired.
    const key = pendingKey(hint.clientId, hint.requestId, proxyId);
    this.pending.delete(key);
    this.pending.set(key, clientInstance === undefined ? {} : { clientInstance });
    peer.send(hint);
    this.deps.metrics.stageHints.inc({ outcome: 'forwarded' });
  }

  private answerHere(peer: ClientPeer, answer: StagedAnswer): void {
    this.deps.metrics.stageHints.inc({ outcome: answer.error ?? 'failed' });
    peer.send(answer);
  }
}

function pendingKey(clientId: string, requestId: string, proxyId: string): string {
  return `${clientId}\n${requestId}\n${proxyId}`;
}
