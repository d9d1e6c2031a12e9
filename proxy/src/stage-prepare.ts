/**
 * A staging hint's layout, acted on: the staged object's encoder and digests are prepared for the
 * REQUEST the client will send (shared/src/endpoint/prepare.ts). The layout is checked as that
 * REQUEST's would be (a codec for the mode, no symbol below the proxy's smallest, a layout the
 * object can have), so a hint can make the proxy do no more than a REQUEST could.
 */
import { Codec, Layout, Mode, prepareObject, type StageLayout } from '@mutp/shared';
import type { CachedObject } from './object-cache';

/** The layout is one a REQUEST would be refused for: nothing was prepared. */
export class LayoutRefused extends Error {
  override readonly name = 'LayoutRefused';
}

export type PrepareStaged = (object: CachedObject, layout: StageLayout, signal: AbortSignal) => Promise<void>;

/** `codecs` is read at each hint: the proxy loads its codecs after it starts. */
export function encoderPreparer(codecs: () => Partial<Record<Mode, Codec>>, minSymbolSize: number): PrepareStaged {
  const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
  return async (object, layout, signal) => {
    const codec = codecs()[layout.mode];
    if (!codec) throw new LayoutRefused(`this proxy serves no ${layout.mode} transfers`);
    if (layout.symbolSize < minSymbolSize)
      throw new LayoutRefused(`symbol size ${layout.symbolSize} is below this proxy's ${minSymbolSize}`);
    let laidOut: Layout;
    try {
      laidOut = new Layout(layout.mode, object.bytes.length, layout.symbolSize, layout.generationSize);
    } catch (e) {
      throw new LayoutRefused(`cannot lay out the object: ${e instanceof Error ? e.message : String(e)}`);
    }
    await prepareObject(object, codec, laidOut, nextTurn, signal);
  };
}
