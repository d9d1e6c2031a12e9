/**
 * The source's layout rules: which layouts it serves (a codec for the mode, a scheduler of that
 * mode, no symbol below its smallest) and how an object is laid out for one (layout.ts). A REQUEST
 * meets them in two steps, what it asks for when it arrives and its object's layout once the
 * object is fetched; a staging hint that names a layout meets both at once, so a hint can make a
 * proxy do no more than a REQUEST could.
 */
import type { Codec } from '../codec/types';
import { Layout } from '../layout';
import { schedulerSupports } from '../modes';
import { ErrorCode, Mode, SchedulerName } from '../wire';
import { messageOf } from './error-replies';

export interface LayoutRules {
  codecs: Partial<Record<Mode, Codec>>;
  /** Smallest symbol served (EndpointLimits.minSymbolSize). */
  minSymbolSize: number;
}

/** A REQUEST's layout, or a staging hint's (which names no scheduler). */
export interface AskedLayout {
  mode: Mode;
  scheduler?: SchedulerName;
  symbolSize: number;
  generationSize: number;
}

/** Why a layout is refused: the ERROR code a REQUEST gets for it, and the message. */
export interface LayoutRefusal {
  code: number;
  message: string;
}

/** Why the source refuses a layout whatever the object (undefined: it serves it). */
export function refusedLayout(
  rules: LayoutRules,
  asked: Omit<AskedLayout, 'generationSize'>,
): LayoutRefusal | undefined {
  if (!rules.codecs[asked.mode])
    return { code: ErrorCode.Unsupported, message: `mode ${asked.mode} is not served by this proxy` };
  if (asked.scheduler !== undefined && !schedulerSupports(asked.mode, asked.scheduler))
    return { code: ErrorCode.Unsupported, message: `scheduler ${asked.scheduler} does not support mode ${asked.mode}` };
  if (asked.symbolSize < rules.minSymbolSize) {
    const message = `symbol size ${asked.symbolSize} is below this proxy's minimum of ${rules.minSymbolSize}`;
    return { code: ErrorCode.Unsupported, message };
  }
  return undefined;
}

/** How an object of `objectLength` bytes is laid out for the asked layout, or why it is not served. */
export function objectLayout(rules: LayoutRules, asked: AskedLayout, objectLength: number): Layout | LayoutRefusal {
  const refusal = refusedLayout(rules, asked);
  if (refusal) return refusal;
  try {
    return new Layout(asked.mode, objectLength, asked.symbolSize, asked.generationSize);
  } catch (e) {
    return { code: ErrorCode.BadRequest, message: `cannot lay out the object: ${messageOf(e)}` };
  }
}
