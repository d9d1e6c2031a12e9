import { loadNodeCodecs } from '@mutp/wasm/node';
import { simulate } from '.';
import { PAPER_DEFAULTS } from './scenario';

async function main() {
  const codecs = await loadNodeCodecs();
  const variants: [string, Record<string, unknown>, Record<string, unknown>, Record<string, unknown>][] = JSON.parse(
    process.env.V ?? '[]',
  );
  for (const [name, scen, sc, rc] of variants) {
    const effs: number[] = [];
    (globalThis as { __help?: string }).__help = (scen as { help?: string }).help;
    (globalThis as { __helpRtts?: number }).__helpRtts = (scen as { helpRtts?: number }).helpRtts;
    const ngs: number[] = [];
    (globalThis as { __capHint?: number[] }).__capHint = (scen as { hint?: boolean }).hint
      ? [896, 896, 896, 1792, 1792, 1792]
      : undefined;
    const share: string[] = [];
    for (let seed = 1; seed <= 5; seed++) {
      const s = {
        ...PAPER_DEFAULTS,
        mode: 'rlnc' as const,
        capsKBps: [896, 896, 896, 1792, 1792, 1792],
        objectBytes: 2 << 20,
        loss: 0,
        window: 240,
        seed,
        startAtCap: true,
        ...scen,
      };
      const r = simulate(s as never, { codecs, senderConfig: sc, receiverConfig: rc });
      effs.push(r.efficiency);
      ngs.push(r.normalizedGoodput);
      if (seed === 1) share.push(r.sources.map((x) => x.useful).join(','));
    }
    effs.sort();
    ngs.sort();
    console.log(`${name}: eff ${effs[2].toFixed(3)} ng ${ngs[2].toFixed(3)} useful ${share[0]}`);
  }
}
void main();
