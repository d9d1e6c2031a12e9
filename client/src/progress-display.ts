/**
 * The progress lines of `mutp get` (cli-progress, one bar per download under way): bytes done
 * and the file's size, speed over the last seconds, ETA, and each proxy's rate or state
 * (proxy-rates.ts). Only on a terminal; elsewhere nothing is drawn.
 */
import { MultiBar, SingleBar } from 'cli-progress';
import type { DownloadProgress } from '@mutp/shared/client';
import { formatBytes, formatRate } from './format';
import { ProxyRates, SourceCounter } from './proxy-rates';

/**
 * Progress that may carry the receiver's per-source counters (read lazily: the line is drawn at
 * most every UPDATE_EVERY_MS while progress comes per datagram).
 */
export type ProgressWithSources = DownloadProgress & { sourceCounters?: () => readonly SourceCounter[] };

/** Speed is measured over this much of the recent past. */
const SPEED_WINDOW_MS = 3000;
/** Updates come per datagram; the line is worked out at most this often (cli-progress draws at 10 fps). */
const UPDATE_EVERY_MS = 100;

export class ProgressDisplay {
  private readonly bars?: MultiBar;

  constructor(
    stream: NodeJS.WriteStream,
    enabled: boolean,
    private readonly clock: () => number = Date.now,
  ) {
    if (!enabled || !stream.isTTY) return;
    this.bars = new MultiBar({
      stream,
      format: ' {name} {bar} {percentage}% | {done} of {size} | {speed} | ETA {eta} | {proxies}',
      hideCursor: true,
      clearOnComplete: false,
      barsize: 24,
      etaBuffer: 50,
    });
  }

  /** A line for one download; `update` it per datagram, `finish` it at the end. */
  track(name: string, proxiesAsked: number): DownloadLine {
    return new DownloadLine(this.bars?.create(1, 0, blankPayload(name, proxiesAsked)), name, proxiesAsked, this.clock);
  }

  /** A message above the bars (or on stderr when there are none). */
  log(line: string): void {
    if (this.bars) this.bars.log(`${line}\n`);
    else console.error(line);
  }

  stop(): void {
    this.bars?.stop();
  }
}

export class DownloadLine {
  private readonly samples: { at: number; done: number }[] = [];
  private proxies: string;
  private updatedAt = 0;
  private lastTotal?: number;
  private latestDone = 0;
  private readonly rates: ProxyRates;

  constructor(
    private readonly bar: SingleBar | undefined,
    private readonly name: string,
    proxiesAsked: number,
    private readonly clock: () => number = Date.now,
  ) {
    this.proxies = `${proxiesAsked} proxies asked`;
    this.rates = new ProxyRates(clock());
  }

  /** A range finished: its sources' bytes count towards each proxy's rate. */
  rangeDone(sources: readonly SourceCounter[]): void {
    if (this.bar) this.rates.rangeDone(sources, this.clock());
  }

  update(done: number, total: number | undefined, progress: ProgressWithSources | undefined): void {
    if (!this.bar) return;
    this.latestDone = done;
    const now = this.clock();
    if (now - this.updatedAt < UPDATE_EVERY_MS && total === this.lastTotal) return;
    this.updatedAt = now;
    this.lastTotal = total;
    this.samples.push({ at: now, done });
    while (this.samples.length > 2 && now - this.samples[0].at > SPEED_WINDOW_MS) this.samples.shift();
    const first = this.samples[0];
    const speed = now > first.at ? ((done - first.done) / (now - first.at)) * 1000 : 0;
    if (progress?.sourceCounters) this.rates.live(progress.sourceCounters());
    this.proxies = this.rates.describe(now) ?? this.proxies;
    if (total !== undefined) this.bar.setTotal(Math.max(total, 1));
    // Before the size is known the bar stays empty (its total is a placeholder 1, not 100 % done).
    this.bar.update(total !== undefined ? done : 0, {
      name: this.name,
      done: formatBytes(done),
      size: total !== undefined ? formatBytes(total) : '?',
      speed: formatRate(speed),
      eta: total !== undefined && speed > 0 ? formatEta((total - done) / speed) : '-',
      proxies: this.proxies,
    });
  }

  /** The line stays, showing the end state. */
  finish(outcome: string): void {
    const value = this.lastTotal !== undefined ? this.latestDone : 0;
    this.bar?.update(value, { done: formatBytes(this.latestDone), eta: '-', proxies: outcome });
    this.bar?.stop();
  }
}

function blankPayload(name: string, proxiesAsked: number) {
  return { name, done: '0 B', size: '?', speed: '-', eta: '-', proxies: `${proxiesAsked} proxies asked` };
}

/** 45s, 3m05s, 2h07m. */
export function formatEta(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
