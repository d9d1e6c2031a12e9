/**
 * The open-file limit of the load run. Every simulated peer is a socket in the generator and one
 * in the origo instance it talks to, so 50,000 sessions need well over the ~20,000 files a
 * process gets here by default. The generator raises its own limit (soft and hard) with
 * prlimit(1) before it starts anything: the origo and redis-server processes it spawns inherit
 * it. Raising the hard limit needs root (CAP_SYS_RESOURCE); without it the run keeps what it has
 * and the caller says how far that goes.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface FileLimit {
  soft: number;
  hard: number;
}

/** The "Max open files" line of /proc/<pid>/limits ("unlimited" is Infinity). */
export function parseFileLimit(limits: string): FileLimit | undefined {
  const match = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)\s+files/m.exec(limits);
  if (!match) return undefined;
  const n = (v: string) => (v === 'unlimited' ? Infinity : Number(v));
  return { soft: n(match[1]), hard: n(match[2]) };
}

export function fileLimit(pid: number | 'self' = 'self'): FileLimit {
  const parsed = parseFileLimit(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  if (parsed === undefined) throw new Error(`no "Max open files" line in /proc/${pid}/limits`);
  return parsed;
}

/** Files a process holds besides its sockets to peers (node, tsx, SQLite, its worker, Redis, pipes). */
export const OTHER_FILES = 1000;
/** Peers per generator process at most: keeps each worker's event loop and heap small too. */
export const MAX_PEERS_PER_WORKER = 12_000;

export interface ProcessPlan {
  /** Generator worker processes (each holds its share of the peers' sockets). */
  workers: number;
  /** Files the busiest process needs (the limit to raise to). */
  filesNeeded: number;
  /** Why the run cannot fit under `limit`, if it cannot. */
  problem?: string;
}

/**
 * How many generator processes a row needs, and whether each origo instance (which holds its
 * share of the peers' sockets in one process) fits under an open-file limit of `limit`.
 */
export function planProcesses(
  clients: number,
  proxies: number,
  instances: number,
  limit: number,
  workersAsked = 0,
): ProcessPlan {
  const peers = clients + proxies;
  const perWorkerCap = Math.max(1, Math.min(MAX_PEERS_PER_WORKER, limit - OTHER_FILES));
  const workers = workersAsked > 0 ? workersAsked : Math.max(1, Math.ceil(peers / perWorkerCap));
  const perInstance = Math.ceil(clients / instances) + Math.ceil(proxies / instances) + OTHER_FILES;
  const perWorker = Math.ceil(peers / workers) + OTHER_FILES;
  const filesNeeded = Math.max(perInstance, perWorker);
  if (filesNeeded <= limit) return { workers, filesNeeded };
  const who =
    perInstance > limit
      ? `each origo instance holds ${perInstance - OTHER_FILES} sockets`
      : `each of ${workers} generator processes holds ${perWorker - OTHER_FILES} sockets`;
  return { workers, filesNeeded, problem: `${who} (+${OTHER_FILES} other files) but the open-file limit is ${limit}` };
}

/**
 * Raises this process's open-file limit to at least `wanted` (never lowers it). Returns the
 * limit in force afterwards and, when it is still short, why.
 */
export function raiseFileLimit(wanted: number): { soft: number; problem?: string } {
  const before = fileLimit();
  if (before.soft >= wanted) return { soft: before.soft };
  const target = Math.max(wanted, Number.isFinite(before.hard) ? before.hard : wanted);
  const out = spawnSync('prlimit', ['--pid', String(process.pid), `--nofile=${target}:${target}`], {
    encoding: 'utf8',
  });
  const after = fileLimit();
  if (after.soft >= wanted) return { soft: after.soft };
  const why = out.error ? out.error.message : (out.stderr ?? '').trim() || `exit ${out.status}`;
  return { soft: after.soft, problem: `open-file limit ${after.soft} < ${wanted} needed (prlimit: ${why})` };
}
