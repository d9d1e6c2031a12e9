/**
 * Where `mutp get` saves a download, decided and checked before any byte is fetched: the URL's
 * base name by default (as curl -O, wget and aria2), `-o` for another name, `-d` for another
 * directory. A name that already exists is refused unless `--allow-overwrite`; an interrupted
 * download of it (its `.mutp` control file) is taken up only with `-c` (`--continue`).
 */
import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { controlPath, partPath } from './part-file';

export class OutputError extends Error {
  override readonly name = 'OutputError';
}

/** The file name a URL saves to: its path's last segment, decoded; `index.html` for a directory. */
export function fileNameOf(url: string): string {
  const path = new URL(url).pathname;
  const last = path.slice(path.lastIndexOf('/') + 1);
  let name: string;
  try {
    name = decodeURIComponent(last);
  } catch {
    name = last;
  }
  // Never a path out of the directory, never a hidden or empty name from the network.
  name = basename(name.replace(/[\\/]/g, '_')).replace(/^\.+/, '');
  return name === '' ? 'index.html' : name;
}

export interface OutputChoice {
  /** `-o`: the file name (relative to `dir` when given, as aria2 reads it). */
  output?: string;
  /** `-d`: the directory. */
  dir?: string;
  continue: boolean;
  allowOverwrite: boolean;
}

export type OutputPlan =
  /** A new download to this file. */
  | { file: string; resume: false; complete?: undefined; stdout?: undefined }
  /** An interrupted download of this file goes on (its control file exists). */
  | { file: string; resume: true; complete?: undefined; stdout?: undefined }
  /** `-c` and the file is there with no interrupted download: nothing to do (as wget -c). */
  | { file: string; complete: true; resume?: undefined; stdout?: undefined }
  /** `-o -`: written to stdout as it is verified (curl's `-o -`). */
  | { file: typeof STDOUT; stdout: true; resume: false; complete?: undefined };

/** The `-o` name that means stdout. */
export const STDOUT = '-';

/**
 * Why `-o -` cannot be used with these choices, or undefined: stdout holds one download, cannot
 * be read back to resume, and is not a directory.
 */
export function stdoutProblem(choice: OutputChoice & { downloads: number; json: boolean }): string | undefined {
  if (choice.downloads > 1) return '-o - writes one download to stdout: give one URL';
  if (choice.continue) return '-o - cannot be resumed (-c): what went to stdout cannot be read back';
  if (choice.dir !== undefined) return '-o - writes to stdout: -d has no use with it';
  if (choice.json) return '--json prints to stdout, which -o - fills with the download: use one or the other';
  return undefined;
}

/**
 * The file `url` saves to, with its directory created and checked writable: every reason it
 * cannot be written is found here, before the download.
 */
export function planOutput(url: string, choice: OutputChoice): OutputPlan {
  const name = choice.output ?? fileNameOf(url);
  const file = resolve(choice.dir ?? '.', name);
  const dir = dirname(file);
  try {
    mkdirSync(dir, { recursive: true });
  } catch (e) {
    throw new OutputError(`cannot create the directory ${dir}: ${messageOf(e)}`);
  }
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    throw new OutputError(`cannot write to ${dir}`);
  }
  if (existsSync(file) && statSync(file).isDirectory()) throw new OutputError(`${file} is a directory`);
  if (existsSync(controlPath(file))) {
    if (choice.continue) return { file, resume: true };
    if (!choice.allowOverwrite)
      throw new OutputError(
        `${file} has an interrupted download (${basename(controlPath(file))}): resume it with -c, or start again with --allow-overwrite`,
      );
  }
  if (existsSync(file) && choice.continue && !choice.allowOverwrite) return { file, complete: true };
  if (existsSync(file) && !choice.allowOverwrite)
    throw new OutputError(`${file} exists: choose another name with -o, or replace it with --allow-overwrite`);
  if (existsSync(partPath(file)) && !choice.allowOverwrite && !choice.continue)
    throw new OutputError(`${partPath(file)} exists: remove it, or replace it with --allow-overwrite`);
  return { file, resume: false };
}

/** Files of one run that would land on the same name: refused before any download. */
export function clashingTargets(files: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const file of files) {
    if (seen.has(file)) return file;
    seen.add(file);
  }
  return undefined;
}

export const displayName = (file: string, cwd = process.cwd()): string =>
  file.startsWith(cwd + '/') ? file.slice(cwd.length + 1) : file;

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
