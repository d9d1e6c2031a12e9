// mpd-parser ships no type declarations: the part of its API the extension uses.
declare module 'mpd-parser' {
  export interface MpdParseOptions {
    manifestUri?: string;
    NOW?: number;
    clientOffset?: number;
  }
  export function parse(manifestString: string, options?: MpdParseOptions): unknown;
  /** The MPD element (xmldom), or throws when the text is not an MPD. */
  export function stringToMpdXml(manifestString: string): import('../src/hook/mpd-budget').XmlElement;
}
