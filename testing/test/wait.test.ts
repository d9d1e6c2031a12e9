import { until, waitFor, within } from '../src/wait';

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

test('within passes the value through, or fails naming what it waited for', async () => {
  await expect(within(Promise.resolve(7), 1000, 'seven')).resolves.toBe(7);
  await expect(within(new Promise(() => {}), 10, 'a promise that never settles')).rejects.toThrow(
    'timed out after 10 ms: a promise that never settles',
  );
});

test('until resolves once the condition holds, or fails naming what it waited for', async () => {
  let ready = false;
  setTimeout(() => (ready = true), 10);
  await until(() => ready, 1000, 'the flag');
  await expect(until(() => false, 10, 'a condition that never holds')).rejects.toThrow(
    'timed out after 10 ms waiting for a condition that never holds',
  );
});
