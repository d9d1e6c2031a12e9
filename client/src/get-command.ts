/**
 * `mutp get`: one or more URLs (or `-i FILE`) saved to files, a bounded number at once, each
 * through the proxies in ranges (file-download.ts). Every output path is decided and checked
 * before the first byte is fetched; the run's exit code is the first failed download's (in the
 * order given), 0 when all were saved.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { ByteRange, SchedulerName } from '@mutp/shared';
import { ClientError, DownloadMode, DownloadProgress, GetResult, MutpClient } from '@mutp/shared/client';
import type { Checksum } from './checksum';
import { EXIT, exitCodeOf } from './exit-codes';
import { ChecksumError, downloadToFile, downloadToStream, FileResult, STDOUT_NAME } from './file-download';
import { formatFileResult } from './format';
import { DownloadItem, parseInputList, urlProblem } from './input-list';
import {
  clashingTargets,
  displayName,
  OutputError,
  OutputPlan,
  planOutput,
  STDOUT,
  stdoutProblem,
} from './output-target';
import { PartFileError, partPath } from './part-file';
import { ProgressDisplay } from './progress-display';
import { ProgressWatchdog } from './progress-watchdog';
import { SplitError } from './split-download';
import { stdoutForDownload } from './stdout-stream';
import { StreamSinkError } from './stream-sink';

export interface GetFlags {
  mode: DownloadMode;
  scheduler?: SchedulerName;
  proxies: number;
  inputFile?: string;
  output?: string;
  dir?: string;
  continue?: boolean;
  allowOverwrite?: boolean;
  maxConcurrentDownloads: number;
  chunkSize: number;
  prefetchRanges: number;
  maxTries: number;
  checksum?: Checksum;
  range?: ByteRange;
  timeout: number;
  progress: boolean;
  json?: boolean;
}

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The downloads a command line asks for, each with its checked output file. Throws UsageError. */
export function planDownloads(urls: readonly string[], flags: GetFlags): { item: DownloadItem; plan: OutputPlan }[] {
  let items: DownloadItem[];
  if (flags.inputFile !== undefined) {
    if (urls.length > 0) throw new UsageError('give URLs or -i FILE, not both');
    let text: string;
    try {
      text = readFileSync(flags.inputFile, 'utf8');
    } catch (e) {
      throw new UsageError(`cannot read ${flags.inputFile}: ${e instanceof Error ? e.message : String(e)}`);
    }
    try {
      items = parseInputList(text, flags.inputFile);
    } catch (e) {
      throw new UsageError(e instanceof Error ? e.message : String(e));
    }
  } else {
    if (urls.length === 0) throw new UsageError('no URL given (or -i FILE)');
    for (const url of urls) {
      const problem = urlProblem(url);
      if (problem) throw new UsageError(problem);
    }
    items = urls.map((url) => ({ url }));
  }
  if (flags.output === STDOUT || items.some((item) => item.out === STDOUT)) {
    const problem = stdoutProblem({
      downloads: items.length,
      continue: flags.continue === true,
      allowOverwrite: flags.allowOverwrite === true,
      json: flags.json === true,
      ...(flags.dir !== undefined ? { dir: flags.dir } : {}),
    });
    if (problem) throw new UsageError(problem);
    return [
      {
        item: { ...items[0], ...(flags.checksum !== undefined ? { checksum: flags.checksum } : {}) },
        plan: { file: STDOUT, stdout: true, resume: false },
      },
    ];
  }
  if (items.length > 1 && flags.output !== undefined)
    throw new UsageError('-o names one file: with several URLs use -d, or out= lines in -i FILE');
  if (items.length > 1 && flags.checksum !== undefined)
    throw new UsageError('--checksum is for one URL: with several, use checksum= lines in -i FILE');
  if (items.length === 1) {
    if (flags.output !== undefined) items[0].out = flags.output;
    if (flags.checksum !== undefined) items[0].checksum = flags.checksum;
  }
  const planned = items.map((item) => {
    try {
      const plan = planOutput(item.url, {
        ...(item.out !== undefined ? { output: item.out } : {}),
        ...(flags.dir !== undefined ? { dir: flags.dir } : {}),
        continue: flags.continue === true,
        allowOverwrite: flags.allowOverwrite === true,
      });
      return { item, plan };
    } catch (e) {
      throw new UsageError(e instanceof Error ? e.message : String(e));
    }
  });
  const clash = clashingTargets(planned.map((p) => p.plan.file));
  if (clash !== undefined)
    throw new UsageError(`two downloads would save to ${clash}: name them apart with out= lines`);
  return planned;
}

interface Outcome {
  code: number;
  result?: FileResult;
  error?: string;
}

/** Runs the planned downloads, at most `flags.maxConcurrentDownloads` at once; the run's exit code. */
export async function runDownloads(
  client: MutpClient,
  planned: { item: DownloadItem; plan: OutputPlan }[],
  flags: GetFlags,
  interrupt: AbortSignal,
): Promise<number> {
  const display = new ProgressDisplay(process.stderr, flags.progress);
  const outcomes: Outcome[] = new Array<Outcome>(planned.length);
  let next = 0;
  const worker = async () => {
    while (next < planned.length) {
      const index = next++;
      outcomes[index] = await downloadOne(client, planned[index], flags, interrupt, display);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(flags.maxConcurrentDownloads, planned.length) }, worker));
  } finally {
    display.stop();
  }
  // With -o - stdout holds the download: the summary goes to stderr.
  const summary = planned.some((p) => p.plan.stdout) ? console.error : console.log;
  for (const o of outcomes) {
    if (o.result) summary(formatFileResult(o.result));
    if (o.error) console.error(`mutp: ${o.error}`);
  }
  if (planned.length > 1) {
    const failed = outcomes.filter((o) => o.code !== EXIT.ok).length;
    console.log(`${planned.length - failed} of ${planned.length} downloads saved${failed ? `, ${failed} failed` : ''}`);
  }
  if (flags.json) {
    const summaries = outcomes.map((o, i) => jsonSummary(planned[i].item.url, o));
    console.log(JSON.stringify(summaries.length === 1 ? summaries[0] : { downloads: summaries }));
  }
  return outcomes.find((o) => o.code !== EXIT.ok)?.code ?? EXIT.ok;
}

async function downloadOne(
  client: MutpClient,
  { item, plan }: { item: DownloadItem; plan: OutputPlan },
  flags: GetFlags,
  interrupt: AbortSignal,
  display: ProgressDisplay,
): Promise<Outcome> {
  const name = plan.stdout ? STDOUT_NAME : displayName(plan.file);
  if (plan.complete) {
    console.error(`mutp: ${name} is already complete (nothing to continue)`);
    return { code: EXIT.ok };
  }
  const line = display.track(name, flags.proxies);
  // No progress for `timeout` ms gives up; so does the user (SIGINT).
  const abort = new AbortController();
  const stop = () => abort.abort(new Error('interrupted'));
  interrupt.addEventListener('abort', stop, { once: true });
  const watchdog = new ProgressWatchdog(flags.timeout, (reason) => abort.abort(reason));
  const options = {
    mode: flags.mode,
    proxies: flags.proxies,
    ...(flags.scheduler ? { scheduler: flags.scheduler } : {}),
    ...(flags.range ? { range: flags.range } : {}),
    chunkBytes: flags.chunkSize,
    prefetchRanges: flags.prefetchRanges,
    maxTries: flags.maxTries,
    ...(item.checksum ? { checksum: item.checksum } : {}),
    signal: abort.signal,
    onBytes: (done: number, total: number | undefined, progress: DownloadProgress | undefined) => {
      watchdog.progress(done);
      line.update(done, total, progress);
    },
    onRangeDone: (result: GetResult) => line.rangeDone(result.sources),
    whileReaderWaits: (flushed: Promise<void>) => watchdog.holdWhile(flushed),
    onRetry: (range: ByteRange, attempt: number, error: unknown, waitMs: number) => {
      watchdog.rearm(); // the wait before a retry does not count against --timeout
      const why = error instanceof Error ? error.message : String(error);
      display.log(
        `mutp: ${name}: bytes ${range.start}-${range.start + range.length - 1}: ${why}; ` +
          `trying again in ${waitMs / 1000} s (try ${attempt} of ${flags.maxTries})`,
      );
    },
  };
  try {
    const result = plan.stdout
      ? await downloadToStream(client, item.url, stdoutForDownload(), options)
      : await downloadToFile(client, item.url, plan.file, { ...options, resume: plan.resume });
    line.finish('saved');
    return { code: EXIT.ok, result };
  } catch (e) {
    line.finish('failed');
    return failure(e, plan.stdout ? undefined : plan.file, abort.signal);
  } finally {
    watchdog.stop();
    interrupt.removeEventListener('abort', stop);
  }
}

/** Why a download failed and its exit code; `file` undefined: it went to stdout (nothing to resume). */
function failure(e: unknown, file: string | undefined, signal: AbortSignal): Outcome {
  const name = file !== undefined ? displayName(file) : STDOUT_NAME;
  const resumable =
    file !== undefined && existsSync(partPath(file)) ? `; ${name}.part is kept: run again with -c to resume` : '';
  if (signal.aborted) {
    const why = signal.reason instanceof Error ? signal.reason.message : 'cancelled';
    return { code: EXIT.cancelled, error: `${name}: ${why}${resumable}` };
  }
  if (e instanceof ChecksumError) return { code: EXIT.failed, error: e.message };
  if (e instanceof PartFileError || e instanceof OutputError || e instanceof StreamSinkError)
    return { code: EXIT.failed, error: `${name}: ${e.message}` };
  if (e instanceof SplitError) return { code: EXIT.failed, error: `${name}: ${e.message}${resumable}` };
  const { code, message } = exitCodeOf(e);
  const hint =
    e instanceof ClientError && /too large|exceeds the limit/.test(e.message) ? ' (try a smaller --chunk-size)' : '';
  return { code, error: `${name}: ${message}${hint}${code === EXIT.failed ? resumable : ''}` };
}

function jsonSummary(url: string, o: Outcome) {
  const r = o.result;
  if (!r) return { url, ok: o.code === EXIT.ok, exitCode: o.code, ...(o.error ? { error: o.error } : {}) };
  return {
    url,
    ok: true,
    file: r.file,
    mode: r.mode,
    bytes: r.bytes,
    fetchedBytes: r.fetchedBytes,
    resumedFrom: r.resumedFrom,
    ranges: r.ranges,
    retries: r.retries,
    prefetch: r.prefetch,
    attributes: {
      ...(r.contentType ? { contentType: r.contentType } : {}),
      ...(r.start > 0 || r.bytes !== r.completeLength
        ? { range: { start: r.start, ...(r.completeLength !== undefined ? { completeLength: r.completeLength } : {}) } }
        : {}),
    },
    durationMs: r.durationMs,
    goodputBps: r.goodputBps,
    normalizedGoodput: r.normalizedGoodput,
    sha256: r.sha256,
    proxiesAsked: r.proxiesAsked,
    proxiesOffered: r.mostProxies,
    sources: r.proxies.map((p) => ({
      proxyId: p.proxyId,
      name: p.name,
      bytes: p.bytes,
      share: p.share,
      ranges: p.ranges,
      failures: p.failures,
    })),
  };
}
