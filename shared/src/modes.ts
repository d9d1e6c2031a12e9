/**
 * What a client and a source agree on before any data moves: the coding modes, which schedulers
 * each mode can run, and the defaults a client asks for when the caller names none. Both sides
 * read it (the receiver checks a request it is about to make, the source endpoint one it got),
 * so it sits beside them and imports neither.
 */
import { Mode, SchedulerName } from './wire';

/** Every coding mode, in wire-id order. */
export const MODES: readonly Mode[] = ['uncoded', 'rlnc', 'fountain'];

/** The scheduler a client requests when the caller names none. */
export const DEFAULT_SCHEDULER: Record<Mode, SchedulerName> = {
  uncoded: 'partitioned',
  rlnc: 'partitioned',
  fountain: 'partitioned',
};

/**
 * Strict moving window in packets (the paper's w) a client requests before it has measured its
 * proxies' path; once it has, it asks for five bandwidth-delay products (window-size.ts). The
 * paper's 240 moves at most 6.7 MB/s at 40 ms, less than six mixed proxies offer; 480 is about 1.6
 * times that path's bandwidth-delay product. `PAPER_WINDOW` is the published value.
 */
export const DEFAULT_WINDOW = 480;
/** The MUTP paper's window (sim `--config paper`). */
export const PAPER_WINDOW = 240;

/** RLNC generation size a client requests by default (window / generationSize generations in flight). */
export const DEFAULT_GENERATION_SIZE = 24;

const SUPPORTED: Record<Mode, readonly SchedulerName[]> = {
  uncoded: ['random', 'partitioned'],
  rlnc: ['rarest', 'partitioned'],
  fountain: ['partitioned'],
};

/** Whether a source can run scheduler `name` in `mode` (a REQUEST for any other pair is refused). */
export function schedulerSupports(mode: Mode, name: SchedulerName): boolean {
  return SUPPORTED[mode]?.includes(name) ?? false;
}
