import { ProxyRates, RATE_WINDOW_MS } from '../src/proxy-rates';

const counter = (proxyId: string, bytes: number, state = 'active') => ({
  proxyId,
  name: `edge-${proxyId}`,
  bytes,
  state,
});

test('live counters: each proxy at its own rate over the window; one that sends nothing is stalled, a failed one lost', () => {
  const rates = new ProxyRates(0);
  rates.live([counter('a', 0), counter('b', 0), counter('c', 0)]);
  expect(rates.describe(0)).toBe('edge-a - edge-b - edge-c -');
  for (let t = 500; t <= RATE_WINDOW_MS + 1000; t += 500) {
    rates.live([counter('a', t * 2000), counter('b', t * 500), counter('c', 0, t >= 3000 ? 'failed' : 'active')]);
    rates.describe(t);
  }
  // a: 2 MB/s, b: 500 kB/s, c: lost once the receiver gave up on it
  rates.live([counter('a', 9_000_000), counter('b', 2_250_000), counter('c', 0, 'failed')]);
  expect(rates.describe(4500)).toBe('edge-a 2.00 MB/s edge-b 500 kB/s edge-c lost');

  const quiet = new ProxyRates(0);
  quiet.live([counter('a', 1000), counter('b', 1000)]);
  quiet.describe(0);
  quiet.live([counter('a', 1000), counter('b', 301_000)]);
  expect(quiet.describe(RATE_WINDOW_MS)).toBe('edge-a stalled edge-b 100 kB/s');
});

test('a range boundary keeps each rate continuous; proxies not in the last range are no longer shown', () => {
  const rates = new ProxyRates(0);
  rates.live([counter('a', 0), counter('b', 0)]);
  rates.describe(0);
  rates.live([counter('a', 1_000_000), counter('b', 1_000_000)]);
  rates.describe(1000);
  // the range ends: its results carry the same bytes as the last live counters
  rates.rangeDone([counter('a', 1_500_000), counter('b', 1_500_000)], 1500);
  rates.live([counter('a', 500_000)]);
  expect(rates.describe(2000)).toBe('edge-a 1.00 MB/s edge-b 750 kB/s');
  rates.rangeDone([counter('a', 1_500_000)], 2500);
  expect(rates.describe(3000)).toBe('edge-a 1.00 MB/s');
});

test('range results only (http mode): the rate of the last range, and never "stalled"', () => {
  const rates = new ProxyRates(0);
  expect(rates.describe(0)).toBeUndefined();
  rates.rangeDone(
    [
      { proxyId: 'a', name: 'edge-a', bytes: 4_000_000 },
      { proxyId: 'b', name: 'edge-b', bytes: 0 },
    ],
    2000,
  );
  expect(rates.describe(9000)).toBe('edge-a 2.00 MB/s edge-b 0 B/s');
  const long = new ProxyRates(0);
  long.rangeDone([counter('a-very-long-proxy-name', 1000)], 1000);
  expect(long.describe(1000)).toBe('edge-a-very~ 1.00 kB/s');
  // A name from the network cannot drive the terminal (escape sequences, line breaks).
  const hostile = new ProxyRates(0);
  hostile.rangeDone([{ proxyId: 'x', name: '\u001b[2Jx\ny', bytes: 1000 }], 1000);
  expect(hostile.describe(1000)).toBe('?[2Jx?y 1.00 kB/s');
});
