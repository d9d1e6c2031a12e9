/** Small seeded PRNG (mulberry32) injected into the core, so runs are reproducible. */
export type Random = () => number; // uniform uint32

export function seededRandom(seed: number): Random {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** Uniform integer in [0, n). */
export function randomBelow(random: Random, n: number): number {
  return Math.floor((random() / 0x100000000) * n);
}
