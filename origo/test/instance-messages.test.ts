/** What one origo instance accepts from another: the envelope and the message inside it, by kind. */
import { parseInstanceMessage } from '../src/cluster/cluster';

const stale = { type: 'stale', url: 'https://origin.example/seg1.m4s', digest: 'ab'.repeat(32) };

test('a conflict verdict for another instance\'s proxy ("stale") passes with its message checked', () => {
  const m = parseInstanceMessage(JSON.stringify({ kind: 'stale', from: 'i-1', proxyId: 'p-1', message: stale }));
  expect(m).toEqual({ kind: 'stale', from: 'i-1', proxyId: 'p-1', message: stale });
});

test.each([
  ['another message type under kind stale', { ...stale, type: 'stage' }],
  ['a digest that is not 64 hex digits', { ...stale, digest: 'xyz' }],
  ['a URL that is not http(s)', { ...stale, url: 'file:///etc/passwd' }],
])('refused: %s', (_, message) => {
  expect(parseInstanceMessage(JSON.stringify({ kind: 'stale', from: 'i-1', proxyId: 'p-1', message }))).toBeUndefined();
});
