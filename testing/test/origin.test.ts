import { makeObject, objectOrigin } from '../src/origin';

test('makeObject gives the same bytes for the same seed, other bytes for another', () => {
  const a = makeObject(1001, 3);
  expect(a).toHaveLength(1001);
  expect(makeObject(1001, 3)).toEqual(a);
  expect(makeObject(1001, 4)).not.toEqual(a);
});

test('objectOrigin serves its objects by path, 404 otherwise, and counts requests', async () => {
  const object = makeObject(5000, 1);
  const origin = await objectOrigin({ '/seg.ts': object });
  try {
    const found = await fetch(`${origin.url}/seg.ts`);
    expect(found.status).toBe(200);
    expect(found.headers.get('content-type')).toBe('video/mp4');
    expect(new Uint8Array(await found.arrayBuffer())).toEqual(object);
    expect((await fetch(`${origin.url}/other.ts`)).status).toBe(404);
    expect(origin.hits).toBe(2);
  } finally {
    await origin.close();
  }
});
