/**
 * A staging hint's layout, acted on: the staged object's encoder and digests are prepared for the
 * REQUEST the client will send (shared/src/endpoint/prepare.ts). The layout must meet the rules a
 * REQUEST's meets at the source endpoint (objectLayout: a codec for the mode, no symbol below the
 * proxy's smallest, a layout the object can have), so a hint can make the proxy do no more than a
 * REQUEST could.
 */
import { Codec, Layout, Mode, objectLayout, prepareObject, type StageLayout } from '@mutp/shared';
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
    const served = codecs();
    const laidOut = objectLayout({ codecs: served, minSymbolSize }, layout, object.bytes.length);
    if (!(laidOut instanceof Layout)) throw new LayoutRefused(laidOut.message);
    await prepareObject(object, served[layout.mode]!, laidOut, nextTurn, signal);
  };
}
