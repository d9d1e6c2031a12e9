/** A process's memory from /proc (Linux), for the benches that watch a child's peak. */
import { readFileSync } from 'node:fs';

/** Peak resident set (VmHWM) of a live process, MiB; 0 once it is gone. */
export function peakRssMiB(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}
