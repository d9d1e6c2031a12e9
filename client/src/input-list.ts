/**
 * The URLs of one `mutp get` run: from the command line, or from `-i FILE` in aria2's input-file
 * form: one URL per line, `#` comments and blank lines skipped, and under a URL indented
 * `out=NAME` and `checksum=sha-256=HEX` lines for that download only.
 */
import { Checksum, parseChecksum } from './checksum';

export interface DownloadItem {
  url: string;
  /** Its file name (`-o` for one URL, `out=` in an input file). */
  out?: string;
  checksum?: Checksum;
}

export class InputListError extends Error {
  override readonly name = 'InputListError';
}

/** Why `url` cannot be downloaded, or undefined: an absolute http(s) URL with a host. */
export function urlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `not a URL: ${url}`;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return `not an http(s) URL: ${url}`;
  if (parsed.hostname === '') return `no host in ${url}`;
  return undefined;
}

export function parseInputList(text: string, source: string): DownloadItem[] {
  const items: DownloadItem[] = [];
  text.split(/\r?\n/).forEach((raw, index) => {
    const where = `${source}:${index + 1}`;
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    if (/^\s/.test(raw)) {
      const item = items[items.length - 1];
      if (!item) throw new InputListError(`${where}: an option line before any URL`);
      const eq = line.indexOf('=');
      const key = eq < 0 ? line : line.slice(0, eq);
      const value = line.slice(eq + 1);
      if (key === 'out' && eq > 0 && value !== '') item.out = value;
      else if (key === 'checksum' && eq > 0) item.checksum = parseChecksum(value);
      else
        throw new InputListError(
          `${where}: unknown option line "${line}" (out=NAME and checksum=sha-256=HEX are read)`,
        );
      return;
    }
    const problem = urlProblem(line);
    if (problem) throw new InputListError(`${where}: ${problem}`);
    items.push({ url: line });
  });
  if (items.length === 0) throw new InputListError(`${source}: no URL in it`);
  return items;
}
