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

/** CPU time (user + system) a live process used so far, seconds; undefined once it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    // The fields after the command name (which may hold spaces), from its closing parenthesis.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime: clock ticks (USER_HZ 100)
  } catch {
    return undefined;
  }
}

/** Where a process's resident set lies, MiB, by kind of mapping (from /proc/PID/smaps). */
export interface RssBreakdown {
  totalMiB: number;
  /** The main thread's brk heap (`[heap]`): glibc's main arena. */
  brkHeapMiB: number;
  /**
   * Anonymous mappings of 64 MiB reserved (or the rest of one): glibc's per-thread arenas
   * (libdatachannel's and quinn's threads allocate there).
   */
  arenaMiB: number;
  /** Every other anonymous mapping: V8's heap pages, large array buffers, thread stacks. */
  otherAnonMiB: number;
  /** Mapped files: node's binary, shared libraries, the native addons. */
  fileMiB: number;
}

const ARENA_BYTES = 64 * 1024 * 1024;

/** The current breakdown of a live process's RSS; undefined once it is gone. */
export function rssBreakdown(pid: number): RssBreakdown | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return undefined;
  }
  const kb = { brk: 0, arena: 0, anon: 0, file: 0 };
  let kind: keyof typeof kb = 'anon';
  // A glibc arena is 64 MiB of address space, aligned, split into a used part and a PROT_NONE
  // rest: two adjacent mappings whose sizes add up to 64 MiB. Pair them up by their start.
  let previous: { end: number; size: number } | undefined;
  for (const line of text.split('\n')) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (header) {
      const start = parseInt(header[1], 16);
      const end = parseInt(header[2], 16);
      const name = header[4];
      const size = end - start;
      if (name === '[heap]') kind = 'brk';
      else if (name.startsWith('/')) kind = 'file';
      else if (
        name === '' &&
        (start % ARENA_BYTES === 0 || previous?.end === start) &&
        isArenaPart(start, size, previous)
      )
        kind = 'arena';
      else kind = 'anon';
      previous = { end, size: name === '' ? size : -1 };
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kb[kind] += Number(rss[1]);
  }
  const mib = (k: number) => Math.round((k / 1024) * 10) / 10;
  return {
    totalMiB: mib(kb.brk + kb.arena + kb.anon + kb.file),
    brkHeapMiB: mib(kb.brk),
    arenaMiB: mib(kb.arena),
    otherAnonMiB: mib(kb.anon),
    fileMiB: mib(kb.file),
  };
}

/** An arena's first mapping starts on a 64 MiB boundary; its rest follows it up to the next one. */
function isArenaPart(start: number, size: number, previous: { end: number; size: number } | undefined): boolean {
  if (start % ARENA_BYTES === 0) return size <= ARENA_BYTES;
  return previous !== undefined && previous.end === start && (start + size) % ARENA_BYTES === 0;
}
