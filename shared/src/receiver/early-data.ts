/**
 * Data that arrives before the transfer can use it: the sources start sending right after their
 * META, but data is used only once a quorum agreed on the object's identity and its unit digests
 * are known, and only from a source whose own META matched. On a real network the second META
 * comes a few milliseconds after the first; dropping what arrives meanwhile would waste that
 * much of every source's capacity. So it is held, per source and bounded, and replayed through
 * the normal (checked) path once it can be used, or discarded with its source.
 */
export interface EarlyPacket {
  unit: number;
  key: number;
  payload: Uint8Array;
}

export class EarlyData {
  private readonly held: EarlyPacket[][];

  constructor(
    sourceCount: number,
    /** Packets held per source; beyond, packets are dropped (a source sends a window's worth before feedback). */
    private readonly maxPacketsPerSource: number,
  ) {
    this.held = Array.from({ length: sourceCount }, () => []);
  }

  /** Holds a copy of the packet; false when the source's share is full (the packet is lost). */
  hold(source: number, unit: number, key: number, payload: Uint8Array): boolean {
    const list = this.held[source];
    if (!list || list.length >= this.maxPacketsPerSource) return false;
    // A copy: the host may reuse the datagram's buffer once handleDatagram returns.
    list.push({ unit, key, payload: payload.slice() });
    return true;
  }

  /** The source's held packets, in arrival order; the source holds none afterwards. */
  take(source: number): EarlyPacket[] {
    const list = this.held[source] ?? [];
    this.held[source] = [];
    return list;
  }

  count(source: number): number {
    return this.held[source]?.length ?? 0;
  }
}
