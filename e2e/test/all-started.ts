/**
 * For a browser suite's set-up that starts things side by side (browsers beside the cluster):
 * waits until every start has ended, kept or failed, then throws the first failure. Each start
 * keeps what it started as soon as it is up (`.then((x) => (thing = x))`), so afterAll stops it
 * even when another start failed; unlike Promise.all, nothing is still starting when afterAll runs.
 */
export async function allStarted(starts: Promise<unknown>[]): Promise<void> {
  const settled = await Promise.allSettled(starts);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
}
