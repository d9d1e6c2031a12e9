/**
 * What the proxies themselves counted: origo's admin listing gives each proxy's HTTP endpoint,
 * whose `/metrics` (Prometheus text, proxy/src/metrics.ts) holds transfers by mode and outcome
 * and bytes sent. Snapshots are compared before and after a playback.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { Cluster } from './cluster';

export interface ProxyListing {
  proxyId: string;
  name: string;
  httpUrl: string;
  capacityBps: number;
  uploadBps: number;
  activeTransfers: number;
  connections: number;
}

export async function adminProxies(cluster: Cluster): Promise<ProxyListing[]> {
  const r = await fetch(`${cluster.origoUrl}/v1/admin/proxies`, {
    headers: { authorization: `Bearer ${cluster.adminToken}` },
  });
  if (!r.ok) throw new Error(`origo admin listing: HTTP ${r.status}`);
  return ((await r.json()) as { proxies: ProxyListing[] }).proxies;
}

/** origo's stored download records (reported by clients, the extension's downloader included). */
export interface OrigoRecord {
  id: number;
  clientId: string;
  receivedAt: string;
  url: string;
  mode: string;
  sources: number;
  bytes: number;
  durationMs: number;
  goodputBps: number;
  normalizedGoodput: number;
  status: string;
  error?: string | null;
}

export async function origoRecords(cluster: Cluster, mode?: string, limit = 1000): Promise<OrigoRecord[]> {
  const q = new URLSearchParams({ limit: String(limit), ...(mode ? { mode } : {}) });
  const r = await fetch(`${cluster.origoUrl}/v1/records?${q}`, {
    headers: { authorization: `Bearer ${cluster.adminToken}` },
  });
  if (!r.ok) throw new Error(`origo records: HTTP ${r.status}`);
  return ((await r.json()) as { records: OrigoRecord[] }).records;
}

/** One Prometheus sample: name, labels, value. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** Per proxy: ended transfers by `mode/outcome`, bytes sent by kind, staging hints by outcome. */
export interface ProxyCounts {
  name: string;
  transfers: Record<string, number>;
  bytesSent: Record<string, number>;
  stageHints: Record<string, number>;
  /** QUIC session requests by outcome (accepted, unauthorized, refused, not-found). */
  quicSessions: Record<string, number>;
}

export async function proxyCounts(cluster: Cluster): Promise<ProxyCounts[]> {
  const listing = await adminProxies(cluster);
  return Promise.all(
    listing.map(async (p) => {
      const r = await fetch(`${p.httpUrl.replace(/\/+$/, '')}/metrics`, monitoring(cluster));
      if (!r.ok) throw new Error(`${p.name} /metrics: HTTP ${r.status}`);
      const samples = parsePrometheus(await r.text());
      const transfers: Record<string, number> = {};
      const bytesSent: Record<string, number> = {};
      const stageHints: Record<string, number> = {};
      const quicSessions: Record<string, number> = {};
      for (const s of samples) {
        if (s.name === 'mutp_proxy_stage_hints_total') stageHints[s.labels.outcome] = s.value;
        if (s.name === 'mutp_proxy_quic_sessions_total') quicSessions[s.labels.outcome] = s.value;
        if (s.name === 'mutp_proxy_transfers_total') transfers[`${s.labels.mode}/${s.labels.outcome}`] = s.value;
        if (s.name === 'mutp_proxy_bytes_sent_total') bytesSent[s.labels.kind] = s.value;
      }
      return { name: p.name, transfers, bytesSent, stageHints, quicSessions };
    }),
  );
}

/** after − before, per proxy (by name), dropping zero entries. */
export function countsDelta(before: ProxyCounts[], after: ProxyCounts[]): ProxyCounts[] {
  const diff = (a: Record<string, number>, b: Record<string, number> = {}) => {
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(a)) if (v - (b[k] ?? 0) !== 0) out[k] = v - (b[k] ?? 0);
    return out;
  };
  return after.map((p) => {
    const prev = before.find((x) => x.name === p.name);
    return {
      name: p.name,
      transfers: diff(p.transfers, prev?.transfers),
      bytesSent: diff(p.bytesSent, prev?.bytesSent),
      stageHints: diff(p.stageHints, prev?.stageHints),
      quicSessions: diff(p.quicSessions, prev?.quicSessions),
    };
  });
}

/** Transfers a proxy ended in `mode`, whatever the outcome. */
export function transfersIn(p: ProxyCounts, mode: string): number {
  return Object.entries(p.transfers)
    .filter(([k]) => k.startsWith(`${mode}/`))
    .reduce((a, [, v]) => a + v, 0);
}

/** SHA-256 of every file under `dir`, by path relative to it ('/'-separated, with a leading '/'). */
export function hashTree(dir: string): Map<string, { sha256: string; bytes: number }> {
  const out = new Map<string, { sha256: string; bytes: number }>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else {
        const bytes = readFileSync(path);
        out.set(`/${relative(dir, path).split(sep).join('/')}`, {
          sha256: createHash('sha256').update(bytes).digest('hex'),
          bytes: bytes.length,
        });
      }
    }
  };
  walk(dir);
  return out;
}

/** Body bytes each proxy has received from origins since it started (its cache's count, /healthz). */
export async function originBytesByProxy(cluster: Cluster): Promise<Record<string, number>> {
  const listing = await adminProxies(cluster);
  const entries = await Promise.all(
    listing.map(async (p) => {
      const r = await fetch(`${p.httpUrl.replace(/\/+$/, '')}/healthz`, monitoring(cluster));
      if (!r.ok) throw new Error(`${p.name} /healthz: HTTP ${r.status}`);
      const health = (await r.json()) as { cache?: { originBytes?: number } };
      return [p.proxyId, health.cache?.originBytes ?? 0] as const;
    }),
  );
  return Object.fromEntries(entries);
}

/** Fetch options that carry the cluster's proxy monitoring token (/metrics, /healthz). */
export function monitoring(cluster: Pick<Cluster, 'metricsToken'>): RequestInit {
  return { headers: { authorization: `Bearer ${cluster.metricsToken}` } };
}
