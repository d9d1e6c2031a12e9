import { waitFor } from '../src/wait';

test('resolves with the first value the probe returns, after failures and undefined', async () => {
  let calls = 0;
  const value = await waitFor(
    'the third call',
    async () => {
      calls++;
      if (calls === 1) throw new Error('not yet');
      return calls === 3 ? 'ready' : undefined;
    },
    10_000,
    1,
  );
  expect(value).toBe('ready');
  expect(calls).toBe(3);
});

test('a timeout names what was awaited, the last error and the context', async () => {
  await expect(
    waitFor(
      'the proxies',
      async () => {
        throw new Error('connection refused');
      },
      20,
      5,
      () => 'proxy p1: listening',
    ),
  ).rejects.toThrow(
    /timed out after 20 ms waiting for the proxies \(last error: Error: connection refused\)\nproxy p1: listening/,
  );
});
