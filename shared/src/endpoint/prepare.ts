/**
 * Readies a cached object for transfers with one layout before any is asked for: a staging hint
 * that names the layout its client will REQUEST with (SoftStage: the segment is ready at the edge
 * when the player asks). The unit digests are computed and the encoder is made and prepared
 * (wirehair solves a code per source block: tens of milliseconds for a 2 MiB segment, which the
 * first packets of a cold transfer otherwise wait for). The lease is let go at the end, so the
 * encoder waits among the object's idle encoders (IdleEncoders) for the REQUEST; where the object
 * keeps none, it is freed and nothing but the digests remains.
 *
 * The work is what a REQUEST of the object would cost, done once per hint. Between source blocks
 * the host's event loop gets a turn (`nextTurn`), so a large object does not hold up transfers.
 */
import type { Codec, UnitEncoder } from '../codec/types';
import type { Layout } from '../layout';
import type { SourceObject } from './source-object';

export async function prepareObject(
  object: Pick<SourceObject, 'encoders' | 'digests' | 'hold'>,
  codec: Codec,
  layout: Layout,
  nextTurn: () => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  // A user of the bytes while it works, as a transfer is.
  const unhold = object.hold?.();
  let encoder: UnitEncoder | undefined;
  try {
    object.digests?.of(layout);
    encoder = object.encoders.lease(codec, layout);
    if (!encoder.prepare) return;
    for (let unit = 0; unit < layout.unitCount; unit++) {
      await nextTurn();
      if (signal?.aborted) return;
      encoder.prepare(unit);
    }
  } finally {
    encoder?.free();
    unhold?.();
  }
}
