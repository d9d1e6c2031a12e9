import { Layout } from '../layout';
import { AddResult, Codec, UnitDecoder, UnitEncoder } from './types';

class UncodedEncoder implements UnitEncoder {
  readonly mode = 'uncoded' as const;
  constructor(
    private readonly object: Uint8Array,
    private readonly layout: Layout,
  ) {}

  encodeInto(unit: number, _key: number, out: Uint8Array): void {
    const start = unit * this.layout.symbolSize;
    out.set(this.object.subarray(start, start + this.layout.payloadLength(unit)));
  }

  free(): void {}
}

class UncodedDecoder implements UnitDecoder {
  readonly mode = 'uncoded' as const;
  private readonly object: Uint8Array;
  private readonly received: Uint8Array;

  constructor(private readonly layout: Layout) {
    this.object = new Uint8Array(layout.objectLength);
    this.received = new Uint8Array(layout.unitCount);
  }

  add(unit: number, _key: number, payload: Uint8Array): AddResult {
    if (!(unit >= 0 && unit < this.layout.unitCount)) return 'invalid';
    if (payload.length !== this.layout.payloadLength(unit)) return 'invalid';
    if (this.received[unit]) return 'redundant';
    this.object.set(payload, unit * this.layout.symbolSize);
    this.received[unit] = 1;
    return 'innovative';
  }

  rank(unit: number): number {
    return this.received[unit] ?? 0;
  }

  isComplete(unit: number): boolean {
    return this.received[unit] === 1;
  }

  readObject(): Uint8Array {
    return this.object;
  }

  free(): void {}
}

export const uncodedCodec: Codec = {
  mode: 'uncoded',
  name: 'uncoded',
  createEncoder: (object, layout) => new UncodedEncoder(object, layout),
  // Views of the object: no state of its own.
  encoderBytes: () => 0,
  createDecoder: (layout) => new UncodedDecoder(layout),
};
