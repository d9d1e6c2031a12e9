/**
 * Where a position in a minified bundle came from, by its source map (version 3): enough to name
 * the functions of a CPU profile of the production extension. A small decoder of the mappings'
 * base64 VLQ, so the profiler needs no source-map package.
 */

export interface OriginalPosition {
  source: string;
  /** 1-based, as editors count. */
  line: number;
  name?: string;
}

interface Segment {
  column: number;
  source: number;
  line: number;
  name: number;
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const DIGIT = new Map([...BASE64].map((c, i) => [c, i]));

/** The signed integers of one VLQ field list ("AAgBC" → [0, 0, 16, 1]). */
export function decodeVlq(text: string): number[] {
  const out: number[] = [];
  let value = 0;
  let shift = 0;
  for (const c of text) {
    const digit = DIGIT.get(c);
    if (digit === undefined) throw new Error(`not base64 VLQ: ${c}`);
    value += (digit & 31) << shift;
    if (digit & 32) {
      shift += 5;
      continue;
    }
    out.push(value & 1 ? -(value >>> 1) : value >>> 1);
    value = 0;
    shift = 0;
  }
  return out;
}

export class SourceMapLookup {
  private readonly lines: Segment[][] = [];
  private readonly sources: string[];
  private readonly names: string[];

  constructor(map: { mappings: string; sources: string[]; names?: string[] }) {
    this.sources = map.sources.map((s) => s.replace(/^webpack:\/\/\/(\.\.\/)?/, ''));
    this.names = map.names ?? [];
    let source = 0;
    let line = 0;
    let name = 0;
    for (const text of map.mappings.split(';')) {
      const segments: Segment[] = [];
      let column = 0;
      for (const field of text.split(',')) {
        if (!field) continue;
        const v = decodeVlq(field);
        column += v[0];
        if (v.length < 4) continue;
        source += v[1];
        line += v[2];
        let n = -1;
        if (v.length >= 5) {
          name += v[4];
          n = name;
        }
        segments.push({ column, source, line, name: n });
      }
      this.lines.push(segments);
    }
  }

  /** The original position of a 0-based line and column of the bundle (the nearest mapping at or before it). */
  lookup(line: number, column: number): OriginalPosition | undefined {
    const segments = this.lines[line];
    if (!segments || segments.length === 0) return undefined;
    let lo = 0;
    let hi = segments.length - 1;
    if (segments[0].column > column) return undefined;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (segments[mid].column <= column) lo = mid;
      else hi = mid - 1;
    }
    const s = segments[lo];
    const position: OriginalPosition = { source: this.sources[s.source] ?? '?', line: s.line + 1 };
    if (s.name >= 0 && this.names[s.name]) position.name = this.names[s.name];
    return position;
  }
}
