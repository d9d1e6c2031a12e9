/** The path-sized window (window-size.ts): five bandwidth-delay products, within bounds. */
import { DATA_RLNC_HEADER_BYTES, DEFAULT_WINDOW, MAX_PATH_WINDOW, WINDOW_BDPS, windowForPath } from '../src/internal';

const SYMBOL = 1120;
const DATAGRAM = SYMBOL + DATA_RLNC_HEADER_BYTES;

describe('windowForPath', () => {
  test('five bandwidth-delay products in packets: six mixed proxies (8.06 MB/s) at 40 ms', () => {
    const capacityBps = (3 * 896 + 3 * 1792) * 1024;
    const bdp = (capacityBps * 0.04) / DATAGRAM;
    expect(windowForPath({ capacityBps, rttMs: 40 }, SYMBOL)).toBe(Math.ceil(WINDOW_BDPS * bdp));
    expect(windowForPath({ capacityBps, rttMs: 40 }, SYMBOL)).toBe(1452);
  });

  test('never below the default window, never above the largest path window', () => {
    expect(windowForPath({ capacityBps: 1e6, rttMs: 1 }, SYMBOL)).toBe(DEFAULT_WINDOW);
    expect(windowForPath({ capacityBps: 1e9, rttMs: 200 }, SYMBOL)).toBe(MAX_PATH_WINDOW);
  });

  test('an unknown or nonsensical path gets the default window', () => {
    expect(windowForPath(undefined, SYMBOL)).toBe(DEFAULT_WINDOW);
    for (const [capacityBps, rttMs] of [
      [0, 40],
      [1e6, 0],
      [NaN, 40],
      [1e6, NaN],
      [-1, 40],
    ])
      expect(windowForPath({ capacityBps, rttMs }, SYMBOL)).toBe(DEFAULT_WINDOW);
  });
});
