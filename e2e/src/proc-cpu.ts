/**
 * Processes' own CPU counters from /proc (Linux), for bench:cpu and profile:browser: a process's
 * CPU by thread (schedstat, ns: finer than stat's 10 ms ticks), the processes a browser started,
 * and what a Chromium process is (its --type and sub-type in its command line).
 */
import { readdirSync, readFileSync } from 'node:fs';

type Pid = number | 'self';

/** CPU ns of each live thread of a process, by thread id, with the thread's name (comm). */
export function threadsCpuNs(pid: Pid): { tid: number; name: string; ns: number }[] {
  const out: { tid: number; name: string; ns: number }[] = [];
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out; // the process ended
  }
  for (const tid of tids) {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      out.push({ tid: Number(tid), name, ns });
    } catch {
      // the thread ended between listing and reading: its time is lost to this reading
    }
  }
  return out;
}

/** CPU ns of every live thread of a process together. */
export const processCpuNs = (pid: Pid): number => threadsCpuNs(pid).reduce((sum, t) => sum + t.ns, 0);

/** A process's CPU ns by thread name (threads alive at the reading). */
export function threadCpuNsByName(pid: Pid): Map<string, number> {
  const byName = new Map<string, number>();
  for (const t of threadsCpuNs(pid)) byName.set(t.name, (byName.get(t.name) ?? 0) + t.ns);
  return byName;
}

export function commandLine(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** Every live process below `root` (children, their children, ...), not `root` itself. */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // ended meanwhile
    }
  }
  const out: number[] = [];
  const queue = [...(children.get(root) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/**
 * What a Chromium process is, from its command line: `chromium renderer (extension)` (the
 * extension's process: its frames, e.g. the downloader, and its service worker),
 * `chromium utility network.mojom.NetworkService`, `chromium gpu-process`, `chromium browser`...;
 * undefined when it is not Chromium.
 */
export function chromiumLabel(cmd: string[]): string | undefined {
  const joined = cmd.join(' ');
  if (!joined.includes('chromium')) return undefined;
  // No --type: the browser itself, or a helper it runs (chrome_crashpad_handler).
  const exe = cmd[0].split('/').pop() ?? '';
  const type = /--type=([\w-]+)/.exec(joined)?.[1] ?? (exe === 'chromium' ? 'browser' : exe);
  const sub = /--utility-sub-type=([\w.]+)/.exec(joined)?.[1];
  const ext = joined.includes('--extension-process') ? ' (extension)' : '';
  return `chromium ${type}${sub ? ` ${sub}` : ''}${ext}`;
}
