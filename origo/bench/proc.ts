/** CPU time and memory of a process from /proc (Linux), to measure each origo instance apart. */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = (() => {
  const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(out.stdout?.trim());
  return Number.isInteger(n) && n > 0 ? n : 100;
})();

/** CPU seconds (user + system) the process has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (2nd field) may hold spaces: count fields from after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

export interface Memory {
  /** Resident set size now (VmRSS). */
  rssBytes: number;
  /** Highest resident set size so far (VmHWM). */
  peakRssBytes: number;
}

export function memory(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => {
    const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
    return match ? Number(match[1]) * 1024 : NaN;
  };
  return { rssBytes: kib('VmRSS'), peakRssBytes: kib('VmHWM') };
}

/** CPU use between two readings, in percent of one core. */
export class CpuMeter {
  private startCpu = 0;
  private startWall = 0;

  constructor(private readonly read: () => number) {}

  start(): void {
    this.startCpu = this.read();
    this.startWall = performance.now();
  }

  percent(): number {
    const seconds = (performance.now() - this.startWall) / 1000;
    return seconds > 0 ? ((this.read() - this.startCpu) / seconds) * 100 : NaN;
  }
}

/** This process's own CPU seconds (the load generator). */
export function ownCpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/** The pid of the redis-server listening on `port` (its process title names the port), if found. */
export function redisPid(port: number): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmdline.startsWith('redis-server') && cmdline.includes(`:${port}`)) return Number(entry);
    } catch {
      // the process exited meanwhile
    }
  }
  return undefined;
}
