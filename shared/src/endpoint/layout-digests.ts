/**
 * The unit digests of one object per layout (integrity.ts), computed once and shared by every
 * transfer that sends the object with that layout: hashing the object is the costliest step of
 * starting a transfer, and one cached segment may be sent to many clients. A few layouts are
 * kept (clients use the defaults); an unusual one pushes out the oldest.
 */
import { Sha256, unitDigests } from '../integrity';
import { Layout } from '../layout';

const MAX_LAYOUTS = 8;

export class LayoutDigests {
  private readonly byLayout = new Map<string, Uint8Array>();

  constructor(
    private readonly object: Uint8Array,
    private readonly sha256?: Sha256,
  ) {}

  of(layout: Layout): Uint8Array {
    const key = `${layout.mode}/${layout.symbolSize}/${layout.generationSize}`;
    let digests = this.byLayout.get(key);
    if (!digests) {
      digests = unitDigests(this.object, layout, this.sha256);
      if (this.byLayout.size >= MAX_LAYOUTS) this.byLayout.delete(this.byLayout.keys().next().value!);
      this.byLayout.set(key, digests);
    }
    return digests;
  }
}
