/** Bounded polling for browser tests and runs: the error says what was awaited and the last failure. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 10_000,
  intervalMs = 100,
  /** More to say when it times out (e.g. the recent output of the processes awaited). */
  context?: () => string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}` +
          (context ? `\n${context()}` : ''),
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
