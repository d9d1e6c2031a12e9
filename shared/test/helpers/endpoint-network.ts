/**
 * One Receiver downloading from real SourceEndpoints over an in-memory network on fake time, 1 ms
 * per step: every datagram is `oneWayMs` away, and each proxy's origin fetch of its object ends
 * `fetchMs` after the endpoint asked for it (never: it never ends). The trust tests (a source still
 * fetching, operators) drive their rogues and slow honest proxies through it.
 */
import { sha256 } from '@noble/hashes/sha256';
import { Admission, Receiver, SharedEncoders, SourceEndpoint } from '../../src/internal';

export interface NetworkProxy {
  endpoint: SourceEndpoint;
  admission: Admission;
  /** The bytes its origin fetch yields. */
  object: Uint8Array;
  fetchMs: number | 'never';
}

export interface NetworkRun {
  transferId: number;
  oneWayMs: number;
  /** Fake time after which the run stops, ended or not. */
  limitMs: number;
  /** Each datagram as it reaches the client, before the receiver reads it. */
  toClient?: (source: number, bytes: Uint8Array) => void;
}

/** Runs until the receiver stops being active; when that happened, or -1 if not within the limit. */
export function runOverNetwork(receiver: Receiver, proxies: NetworkProxy[], run: NetworkRun): number {
  const inFlight: { at: number; toProxy: boolean; source: number; bytes: Uint8Array }[] = [];
  const readyAt: (number | undefined)[] = proxies.map(() => undefined);
  for (let t = 0; t <= run.limitMs; t++) {
    for (let k = 0; k < inFlight.length; k++) {
      const d = inFlight[k];
      if (d.at > t) continue;
      inFlight.splice(k--, 1);
      if (d.toProxy) proxies[d.source].endpoint.handleDatagram(d.bytes, t);
      else {
        run.toClient?.(d.source, d.bytes);
        receiver.handleDatagram(d.source, d.bytes, t);
      }
    }
    proxies.forEach((p, i) => {
      const ep = p.endpoint;
      for (let e = ep.pollEvent(); e; e = ep.pollEvent())
        if (e.type === 'fetch' && p.fetchMs !== 'never') readyAt[i] = t + p.fetchMs;
      if (readyAt[i] !== undefined && readyAt[i]! <= t) {
        readyAt[i] = undefined;
        const encoders = new SharedEncoders(p.object, p.admission.memory);
        ep.objectReady(run.transferId, { bytes: p.object, digest: sha256(p.object), encoders, cached: true }, t);
      }
      const deadline = ep.nextDeadline();
      if (deadline !== null && deadline <= t) ep.handleTimeout(t);
      const send = (bytes: Uint8Array) => inFlight.push({ at: t + run.oneWayMs, toProxy: false, source: i, bytes });
      for (let d = ep.pollControl(); d; d = ep.pollControl()) send(d);
      for (let n = 0, d = ep.pollDatagram(t); d && n < 32; n++, d = ep.pollDatagram(t)) send(d.slice());
    });
    const deadline = receiver.nextDeadline();
    if (deadline !== null && deadline <= t) receiver.handleTimeout(t);
    for (let d = receiver.pollDatagram(t); d; d = receiver.pollDatagram(t))
      inFlight.push({ at: t + run.oneWayMs, toProxy: true, source: d.source, bytes: d.bytes });
    if (receiver.status !== 'active') return t;
  }
  return -1;
}
