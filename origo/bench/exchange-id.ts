/**
 * The connection id of a simulated offer carries what the proxy needs to time the relay on its
 * own: when the client sent it (a system-wide monotonic clock, so the client and the proxy may
 * sit in different generator processes), whether it belongs to the measured window, and the
 * client's origo instance (same- or cross-instance relay). The signalling schema allows
 * [A-Za-z0-9_.:-], at most 64 characters: `b<client>.<seq>:<m|w><instance>:<sent µs>`.
 */

/** Milliseconds on CLOCK_MONOTONIC: one clock for every process of the machine. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export interface ExchangeStamp {
  client: number;
  sequence: number;
  /** Started inside the measured window. */
  measured: boolean;
  clientInstance: number;
  /** monotonicMs() when the client sent the offer (microsecond resolution). */
  sentAtMs: number;
}

export function encodeExchangeId(s: ExchangeStamp): string {
  return `b${s.client}.${s.sequence}:${s.measured ? 'm' : 'w'}${s.clientInstance}:${Math.round(s.sentAtMs * 1000)}`;
}

const PATTERN = /^b(\d+)\.(\d+):([mw])(\d+):(\d+)$/;

/** The stamp of a connection id made by encodeExchangeId, or undefined for any other id. */
export function decodeExchangeId(id: string): ExchangeStamp | undefined {
  const m = PATTERN.exec(id);
  if (!m) return undefined;
  return {
    client: Number(m[1]),
    sequence: Number(m[2]),
    measured: m[3] === 'm',
    clientInstance: Number(m[4]),
    sentAtMs: Number(m[5]) / 1000,
  };
}

/** The proxy ids of a run: proxy i registers on instance i % instances, so its id names both. */
export const benchProxyId = (i: number): string => `bench-p${i}`;

export function proxyInstanceOf(proxyId: string, instances: number): number | undefined {
  const m = /^bench-p(\d+)$/.exec(proxyId);
  return m ? Number(m[1]) % instances : undefined;
}
