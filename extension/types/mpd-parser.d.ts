// mpd-parser ships no type declarations: the part of its API the extension uses.
declare module 'mpd-parser' {
  export interface MpdParseOptions {
    manifestUri?: string;
    NOW?: number;
    clientOffset?: number;
  }
  export function parse(manifestString: string, options?: MpdParseOptions): unknown;
  /** The MPD as a DOM document (xmldom), the first step of parse(). */
  export function stringToMpdXml(manifestString: string): unknown;
  /** Each representation's attributes and segment information, before any segment is listed. */
  export function inheritAttributes(
    mpd: unknown,
    options?: MpdParseOptions,
  ): { representationInfo: { attributes: Record<string, unknown>; segmentInfo: Record<string, unknown> }[] };
}
