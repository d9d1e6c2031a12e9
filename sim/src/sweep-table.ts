/** The sweep's maps as plain-text tables for the terminal: one per slice, cap mix and mode. */
import { SweepDocument, sweepMatrix, SweepRow, capKindName } from './sweep';

/** "0.97 4.3x": efficiency and goodput against Parallel HTTP; "!" marks failed or inexact runs. */
function cellText(r: SweepRow | null): string {
  if (!r) return '-';
  const speedup = r.mode === 'http' || r.speedupVsHttp == null ? '' : ` ${r.speedupVsHttp.toFixed(2)}x`;
  const flag = r.failed > 0 || !r.byteExact ? '!' : '';
  return `${r.efficiency.toFixed(2)}${speedup}${flag}`;
}

export function formatSweepTables(doc: SweepDocument): string {
  const out: string[] = [];
  for (const slice of doc.slices)
    for (const capKind of slice.capKinds)
      for (const variant of doc.variants) {
        const matrix = sweepMatrix(doc, slice.id, capKind, variant);
        out.push(`${slice.title}, ${capKindName(capKind)}, ${slice.fixed}: ${variant} (efficiency, x HTTP)`);
        const header = [`${slice.y.label} \\ ${slice.x.label}`, ...slice.x.values];
        const lines = matrix.map((cells, i) => [slice.y.values[i], ...cells.map(cellText)]);
        const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
        const fmt = (cells: string[]) =>
          cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
        out.push(fmt(header), ...lines.map(fmt), '');
      }
  const failed = doc.rows.filter((r) => r.failed > 0 || !r.byteExact).length;
  out.push(
    `${doc.simulations} simulations (${doc.seeds} seeds per cell, medians), ${doc.elapsedSeconds} s; ` +
      `cells with a failed or inexact download ("!"): ${failed}.`,
  );
  return out.join('\n');
}
