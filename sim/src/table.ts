import { GridRow } from './grid';

const KIB = 1024;

export function formatTable(rows: GridRow[]): string {
  const header = [
    'mode',
    'sched',
    'N',
    'caps KB/s',
    'object',
    'loss',
    'w',
    'median ms',
    'goodput MB/s',
    'eff',
    'norm.gp',
    'sent/useful',
    'x http',
    'fail',
  ];
  const lines = rows.map((r) => [
    r.mode,
    r.scheduler,
    String(r.sources),
    summarizeCaps(r.capsKBps),
    `${r.objectBytes / (KIB * KIB)} MiB`,
    `${r.loss * 100}%`,
    String(r.window),
    r.medianDownloadMs.toFixed(0),
    (r.goodputBps / 1e6).toFixed(2),
    r.efficiency.toFixed(3),
    r.normalizedGoodput.toFixed(3),
    r.sentPerUseful.toFixed(3),
    r.speedupVsHttp == null ? '-' : r.speedupVsHttp.toFixed(2),
    r.failed > 0 || !r.byteExact ? `${r.failed}${r.byteExact ? '' : ' NOT EXACT'}` : '0',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
  return [fmt(header), fmt(widths.map((w) => '-'.repeat(w))), ...lines.map(fmt)].join('\n');
}

function summarizeCaps(caps: number[]): string {
  const counts = new Map<number, number>();
  for (const c of caps) counts.set(c, (counts.get(c) ?? 0) + 1);
  return [...counts].map(([c, n]) => `${n}x${c}`).join('+');
}
