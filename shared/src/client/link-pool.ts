/**
 * A client's live proxy links, by proxy, reused across downloads: a download asks for `count`
 * links and gets the open ones it may use, new ones to the proxies it prefers, and new ones to
 * proxies origo offers in place of those that cannot be reached. Concurrent downloads wait for
 * the same connection instead of opening a second one, and a link lost mid-download reconnects
 * through a working origo session.
 */
import { DEFAULT_RECEIVER_CONFIG, Mode, ProxyInfo } from '..';
import type { ClientConfig, Limits } from './client-config';
import { ClientError } from './errors';
import { ClientHost } from './host';
import type { OrigoFailover } from './origo-failover';
import { OrigoSession } from './origo-session';
import { ProxyLink, RetrySoon, TransportConnector } from './proxy-link';
import type { ProxyExclusions } from './proxy-exclusions';
import type { TransportOpener } from './transport-choice';

const why = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** Each attempt to reconnect a source lost mid-download gets this long (they repeat until the stall timeout). */
const RECONNECT_ATTEMPT_MS = 5000;
/**
 * A new origo session while reconnecting gets this long, plus a second per failed attempt: short,
 * so a connection begun in the gap (whose SYN backs off) is soon replaced by one that starts after
 * it; growing, so a slow path still gets through.
 */
const RECONNECT_ORIGO_MS = 2000;
/** Between two attempts to reach origo while reconnecting. */
const RECONNECT_ORIGO_RETRY_MS = 250;
/**
 * Tries per proxy connection. libdatachannel 0.24 (node-datachannel 0.33.4) loses about one
 * handshake in a hundred to races in its DTLS start (libdatachannel #1632, node-datachannel #443;
 * fixed upstream, not released), and such a failure comes within milliseconds, sometimes twice
 * in a row: a fast failure is tried again up to this many times in all. A connection that times
 * out is tried once more only (the proxy may simply be unreachable: each try costs the timeout).
 */
const LINK_ATTEMPTS = 3;

export class LinkPool {
  /** Live connections by proxy id, reused across downloads. */
  private readonly links = new Map<string, ProxyLink>();
  private readonly pendingLinks = new Map<string, Promise<ProxyLink>>();
  /** The modes each linked proxy was offered (or chosen) for: a link serves those without origo. */
  private readonly modesOf = new Map<string, Set<Mode>>();

  constructor(
    private readonly host: ClientHost,
    private readonly config: Pick<ClientConfig, 'origoTimeoutMs' | 'connectTimeoutMs' | 'stallTimeoutMs' | 'trace'>,
    private readonly origo: OrigoFailover,
    private readonly exclusions: ProxyExclusions,
    private readonly transports: TransportOpener,
  ) {}

  /** `count` live links (fewer if origo has fewer proxies), reusing open ones. */
  async connect(
    session: OrigoSession,
    count: number,
    mode: Mode,
    excluded: string[],
    limits: Limits,
    preferred: readonly ProxyInfo[] = [],
  ): Promise<ProxyLink[]> {
    this.forgetClosed();
    const chosen: ProxyLink[] = [];
    const failed: string[] = [];
    // Why each proxy could not be reached, for the error when none could.
    const reasons: string[] = [];
    const note = (r: PromiseRejectedResult) => reasons.push(why(r.reason));
    const leaving = new Set(this.exclusions.leaving());
    // Going away: origo is asked for others in their place, as for proxies that cannot be reached.
    const staying = preferred.filter((p) => !leaving.has(p.proxyId));
    if (staying.length > 0) {
      const wanted = staying.slice(0, count);
      const opened = await Promise.allSettled(wanted.map((proxy) => this.linkTo(session, proxy, limits.connectMs)));
      if (!session.isOpen) throw new ClientError('origo-unreachable', 'origo was lost while connecting to proxies');
      opened.forEach((r, i) => {
        if (r.status === 'fulfilled') chosen.push(r.value);
        else {
          failed.push(wanted[i].proxyId);
          this.exclusions.failed(wanted[i].proxyId);
          note(r);
        }
      });
    }
    const others = () => [...excluded, ...failed, ...chosen.map((l) => l.proxy.proxyId)];
    for (let attempt = 0; attempt < 3 && chosen.length < count; attempt++) {
      const exclude = [...this.exclusions.avoided(), ...others()];
      if (!(await this.linkOffered(session, count - chosen.length, mode, exclude, limits, { chosen, failed, note })))
        break;
    }
    // Short of links: proxies that failed in an earlier download get one more try (proxy-exclusions.ts).
    const retry = chosen.length < count ? new Set(this.exclusions.secondChances(failed)) : new Set<string>();
    if (retry.size > 0) {
      const exclude = [...this.exclusions.avoided().filter((id) => !retry.has(id)), ...others()];
      await this.linkOffered(session, count - chosen.length, mode, exclude, limits, { chosen, failed, note });
    }
    for (const link of chosen) this.noteMode(link.proxy.proxyId, mode);
    if (chosen.length === 0) {
      const detail = reasons.length > 0 ? ` (${reasons.join('; ')})` : ' (origo offered none)';
      throw new ClientError('no-proxies', `no proxy could be reached for mode ${mode}${detail}`);
    }
    return chosen;
  }

  /**
   * Asks origo for `count` proxies, none of `exclude`, and links to those it offers: the links
   * go into `into.chosen`, the proxies that cannot be reached into `into.failed` (and the
   * exclusions), why into `into.note`. False when origo offered none.
   */
  private async linkOffered(
    session: OrigoSession,
    count: number,
    mode: Mode,
    exclude: string[],
    limits: Limits,
    into: { chosen: ProxyLink[]; failed: string[]; note: (r: PromiseRejectedResult) => void },
  ): Promise<boolean> {
    // With no link yet, an empty offer would fail the download: right after origo's return it is asked again.
    const offered =
      into.chosen.length === 0
        ? await this.origo.offers(session, count, mode, exclude, limits.origoMs)
        : await session.requestProxies(count, mode, exclude, limits.origoMs);
    if (offered.length === 0) return false;
    const opened = await Promise.allSettled(offered.map((proxy) => this.linkTo(session, proxy, limits.connectMs)));
    // Their signalling went with origo: no proxy is to blame, the caller tries another instance.
    if (!session.isOpen) throw new ClientError('origo-unreachable', 'origo was lost while connecting to proxies');
    opened.forEach((r, i) => {
      if (r.status === 'fulfilled') into.chosen.push(r.value);
      else {
        into.failed.push(offered[i].proxyId);
        this.exclusions.failed(offered[i].proxyId);
        into.note(r);
      }
    });
    return true;
  }

  /**
   * Links open now that a `mode` download may use without asking origo (it is away): of
   * `preferred` when given (the proxies a segment was staged at), else any linked for `mode`;
   * none that is excluded, avoided or leaving; at most `count`. A link lost meanwhile cannot be
   * made again without origo's signalling, so this may be fewer than wanted.
   */
  openLinks(count: number, mode: Mode, excluded: readonly string[], preferred: readonly ProxyInfo[] = []): ProxyLink[] {
    this.forgetClosed();
    const skip = new Set([...this.exclusions.avoided(), ...excluded]);
    const candidates =
      preferred.length > 0
        ? preferred.flatMap((p) => this.links.get(p.proxyId) ?? [])
        : [...this.links.values()].filter((l) => this.modesOf.get(l.proxy.proxyId)?.has(mode));
    return candidates.filter((l) => l.alive && !skip.has(l.proxy.proxyId)).slice(0, count);
  }

  /** The proxies whose link says they are going away (ERROR GoingAway: they drain). */
  goingAway(): string[] {
    return [...this.links.values()].filter((l) => l.goingAway !== undefined).map((l) => l.proxy.proxyId);
  }

  /** The host's network changed: links with transfers under way reconnect on their own; idle ones close. */
  networkChanged(): void {
    for (const link of this.links.values()) link.transportLost('network changed');
  }

  /** Closes the link to `proxyId`, if any, and forgets it. */
  drop(proxyId: string, reason: string): void {
    this.links.get(proxyId)?.close(reason);
    this.links.delete(proxyId);
    this.modesOf.delete(proxyId);
  }

  /** Closes every link. */
  closeAll(reason?: string): void {
    const links = [...this.links.values()];
    this.links.clear();
    this.modesOf.clear();
    for (const link of links) link.close(reason);
  }

  private forgetClosed(): void {
    for (const [id, link] of this.links) {
      if (link.state !== 'closed') continue;
      this.links.delete(id);
      this.modesOf.delete(id);
    }
  }

  private noteMode(proxyId: string, mode: Mode): void {
    const modes = this.modesOf.get(proxyId) ?? new Set<Mode>();
    modes.add(mode);
    this.modesOf.set(proxyId, modes);
  }

  private linkTo(session: OrigoSession, proxy: ProxyInfo, timeoutMs: number): Promise<ProxyLink> {
    const existing = this.links.get(proxy.proxyId);
    if (existing?.alive) return Promise.resolve(existing);
    // A link reconnecting on its own is the connection to wait for, not a reason for a second one.
    if (existing?.state === 'reconnecting') return existing.ready().then(() => existing);
    // Concurrent downloads wait for the same connection instead of opening a second one.
    const pending = this.pendingLinks.get(proxy.proxyId);
    if (pending) return pending;
    const opening = this.openLinkRetrying(session, proxy, timeoutMs);
    this.pendingLinks.set(proxy.proxyId, opening);
    const forget = () => this.pendingLinks.delete(proxy.proxyId);
    opening.then(forget, forget);
    return opening;
  }

  /** A fresh link per try (see LINK_ATTEMPTS); the last failure is the answer. */
  private async openLinkRetrying(session: OrigoSession, proxy: ProxyInfo, timeoutMs: number): Promise<ProxyLink> {
    let timeouts = 0;
    for (let attempt = 1; ; attempt++) {
      if (!session.isOpen) throw new ClientError('origo-unreachable', 'the origo session is closed');
      const link = new ProxyLink(proxy, {
        clock: this.host.clock,
        reconnect: this.reconnector(proxy),
        networkAnswers: () => this.origo.answers(),
        reconnectAttemptMs: Math.min(this.config.connectTimeoutMs, RECONNECT_ATTEMPT_MS),
        reconnection: { windowMs: this.config.stallTimeoutMs ?? DEFAULT_RECEIVER_CONFIG.stallTimeoutMs },
        trace: this.config.trace,
      });
      link.onGoingAway = () => this.exclusions.announceLeaving(proxy.proxyId);
      try {
        await link.connect((ms) => this.transports.open(session, proxy, ms), timeoutMs);
        this.links.set(proxy.proxyId, link);
        return link;
      } catch (e) {
        if (link.timedOut) timeouts++;
        // Origo is gone: retrying through it would only time out.
        if (!session.isOpen || attempt >= LINK_ATTEMPTS || timeouts >= 2) throw e;
        this.config.trace?.(`${proxy.name}: connection attempt ${attempt} failed (${why(e)}), trying again`);
      }
    }
  }

  /**
   * One attempt at a new transport to `proxy` after its link was lost mid-download (a
   * disconnection, a network change); the link's endpoint repeats attempts, backing off, until
   * its transfers' stall timeout. Origo comes first, checked (OrigoFailover.live): the signalling
   * goes through it, and its answer says the network is back. An origo that does not answer yet
   * is tried again soon, each time with a second more.
   */
  private reconnector(proxy: ProxyInfo): TransportConnector {
    let origoFailures = 0;
    return async (timeoutMs) => {
      let session: OrigoSession;
      try {
        session = await this.origo.live(
          Math.min(this.config.origoTimeoutMs, RECONNECT_ORIGO_MS + 1000 * origoFailures),
        );
      } catch (e) {
        origoFailures++;
        throw new RetrySoon(`origo not reachable yet: ${why(e)}`, RECONNECT_ORIGO_RETRY_MS);
      }
      origoFailures = 0;
      return this.transports.open(session, proxy, timeoutMs);
    };
  }
}
