/** The statistics record of one answered request (the popup's and the background's segment log). */
import type { GetResult, StagerStats } from '@mutp/shared/client';
import type { GetRequest, ProxyShareRecord, SegmentRecord } from '../common/messages';
import { formatRange, redactUrl } from '../common/media';

export interface Answered {
  ok: boolean;
  reason?: string;
  detail?: string;
  bytes?: number;
  objectBytes?: number;
  result?: GetResult;
}

/**
 * `req`'s record: `totalMs` from the page's request to the answer; `staged` whether a proxy held
 * the segment when its download started, with the frame's staging so far (staged requests only).
 */
export function segmentRecord(
  req: GetRequest,
  o: Answered,
  totalMs: number,
  staging?: { staged: boolean; stats: StagerStats },
): SegmentRecord {
  const r = o.result;
  const proxies: ProxyShareRecord[] = (r?.sources ?? []).map((s) => ({
    name: s.name,
    proxyId: s.proxyId,
    share: s.share,
    useful: Number('useful' in s ? s.useful : s.bytes) || 0,
    ...('transport' in s && typeof s.transport === 'string' ? { transport: s.transport } : {}),
  }));
  const record: SegmentRecord = {
    at: Date.now(),
    url: redactUrl(req.url),
    ok: o.ok,
    mode: req.mode,
    bytes: o.bytes ?? 0,
    objectBytes: o.objectBytes ?? r?.object.byteLength ?? 0,
    durationMs: r?.durationMs ?? 0,
    totalMs,
    goodputBps: r?.goodputBps ?? 0,
    normalizedGoodput: r?.normalizedGoodput ?? 0,
    cached: o.ok && !r,
    proxies,
  };
  if (o.reason) record.reason = o.reason;
  if (o.detail) record.detail = o.detail.split(req.url).join(record.url).slice(0, 300);
  if (req.range) record.range = formatRange(req.range);
  if (staging) {
    record.staged = staging.staged;
    const { ordersSent, hintsStaged, wasted, neededAhead, spread } = staging.stats;
    record.staging = { ordersSent, hintsStaged, wasted, neededAhead, spread };
  }
  return record;
}
