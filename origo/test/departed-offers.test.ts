import { DepartedOffers } from '../src/departed-offers';

describe('DepartedOffers: what a client whose session ended was offered, for a while', () => {
  test('taken once, within the TTL, with the most recent ids only', () => {
    const d = new DepartedOffers({ maxClients: 10, maxIdsPerClient: 2, ttlMs: 1000 });
    d.remember('c1', ['p1', 'p2', 'p3'], 0);
    expect(d.take('c1', 1000)).toEqual(['p2', 'p3']);
    expect(d.take('c1', 1000)).toEqual([]);
    d.remember('c2', ['p1'], 0);
    expect(d.take('c2', 1001)).toEqual([]);
    expect(d.size).toBe(0);
  });

  test('bounded in clients: the oldest is forgotten first; nothing offered is not remembered', () => {
    const d = new DepartedOffers({ maxClients: 2, maxIdsPerClient: 4, ttlMs: 1000 });
    d.remember('a', ['p1'], 0);
    d.remember('b', ['p2'], 1);
    d.remember('c', ['p3'], 2);
    d.remember('e', [], 3);
    expect(d.size).toBe(2);
    expect(d.take('a', 5)).toEqual([]);
    expect(d.take('b', 5)).toEqual(['p2']);
    expect(d.take('c', 5)).toEqual(['p3']);
  });
});
