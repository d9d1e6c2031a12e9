/**
 * What a client tells origo about its downloads: a record of each one, complete or failed (when
 * the config asks for records), and the signed METAs of a conflict between its sources. Each goes
 * on the download's own session, or on the one that replaced it since.
 */
import { ByteRange, DownloadRecord, Mode } from '..';
import type { ClientConfig, DownloadMode, GetResult } from './client-config';
import { ClientError } from './errors';
import { OrigoSession } from './origo-session';
import { ProxyLink } from './proxy-link';

export class DownloadRecords {
  constructor(
    private readonly config: Pick<ClientConfig, 'records' | 'recordUrl' | 'symbolSize'>,
    /** The session a message about a download on `session` goes on (OrigoFailover.liveSession). */
    private readonly liveSession: (session: OrigoSession) => OrigoSession,
  ) {}

  complete(
    session: OrigoSession,
    url: string,
    mode: DownloadMode,
    r: GetResult,
    scheduler: string | undefined,
    sources: number,
  ): void {
    if (!this.config.records) return;
    const record: DownloadRecord = {
      url: this.recordUrl(url),
      mode,
      scheduler,
      sources,
      bytes: r.object.length,
      durationMs: r.durationMs,
      goodputBps: r.goodputBps,
      normalizedGoodput: Math.min(1, r.normalizedGoodput),
      status: 'complete',
      // Counts are in packets; Parallel HTTP bytes are counted in symbol-sized packets too.
      proxies: r.sources.map((s) => {
        const packets = Math.ceil(s.bytes / this.config.symbolSize);
        return {
          proxyId: s.proxyId,
          received: 'received' in s ? s.received : packets,
          useful: 'useful' in s ? s.useful : s.share === 1 ? packets : 0,
          share: s.share,
        };
      }),
    };
    this.liveSession(session).sendRecord(record);
  }

  failed(
    session: OrigoSession,
    url: string,
    mode: Mode,
    scheduler: string,
    links: ProxyLink[],
    error: ClientError,
  ): void {
    if (!this.config.records) return;
    const shown = this.recordUrl(url);
    this.liveSession(session).sendRecord({
      url: shown,
      mode,
      scheduler,
      sources: links.length,
      bytes: 0,
      durationMs: 0,
      goodputBps: 0,
      normalizedGoodput: 0,
      status: 'failed',
      error: error.message.split(url).join(shown).slice(0, 512),
      // Which proxies took part: origo refuses a record about none (nothing in it to check).
      proxies: links.slice(0, 32).map((l) => ({ proxyId: l.proxy.proxyId, received: 0, useful: 0, share: 0 })),
    });
  }

  /**
   * Hands a conflict's signed METAs to origo, which judges them against the origin. Only for a
   * URL this client would show origo anyway (recordUrl leaves it whole): origo must fetch the very
   * URL the proxies signed, and a redacted one (a signed CDN token in the query) stays here.
   */
  conflict(
    session: OrigoSession,
    url: string,
    range: ByteRange | undefined,
    statements: { proxyId: string; meta: Uint8Array }[],
  ): void {
    if (this.recordUrl(url) !== url) return;
    this.liveSession(session).sendConflict(url, range, statements);
  }

  private recordUrl(url: string): string {
    return (this.config.recordUrl ? this.config.recordUrl(url) : url).slice(0, 4096) || 'about:redacted';
  }
}
