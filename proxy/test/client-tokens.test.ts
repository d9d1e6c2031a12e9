/**
 * Client tokens at the proxy: the general audience (clients of an older origo) and this proxy's
 * own (`proxyTokenAudience`) are accepted; another proxy's token is refused, so a proxy cannot
 * spend elsewhere the tokens its clients presented to it.
 */
import { proxyTokenAudience } from '@mutp/shared';
import { testTokens } from './helpers';

test("a token for this proxy alone is accepted once the proxy knows its id; another proxy's never", async () => {
  const { verifier, sign } = await testTokens();
  const mine = await sign('c-1', 300, undefined, proxyTokenAudience('p-1'));
  const theirs = await sign('c-1', 300, undefined, proxyTokenAudience('p-2'));
  const general = await sign('c-1');
  // Before registration the proxy has no id: only the general audience counts.
  expect(await verifier.verify(mine)).toEqual({ ok: false, reason: 'invalid' });
  expect(await verifier.verify(general)).toEqual({ ok: true, clientId: 'c-1' });
  verifier.setProxyId('p-1');
  expect(await verifier.verify(mine)).toEqual({ ok: true, clientId: 'c-1' });
  expect(await verifier.verify(general)).toEqual({ ok: true, clientId: 'c-1' });
  expect(await verifier.verify(theirs)).toEqual({ ok: false, reason: 'invalid' });
  // A prefix of the audience is not the audience.
  expect(await verifier.verify(await sign('c-1', 300, undefined, 'mutp-proxy:p-'))).toEqual({
    ok: false,
    reason: 'invalid',
  });
});

test("the network claim is origo's word on the client's network; a malformed one voids the token", async () => {
  const { verifier, sign } = await testTokens();
  const withNetwork = await sign('c-1', 300, undefined, 'mutp-proxy', { net: '203.0.113.0/24' });
  expect(await verifier.verify(withNetwork)).toEqual({ ok: true, clientId: 'c-1', network: '203.0.113.0/24' });
  for (const net of ['', 42, 'x'.repeat(65)]) {
    const bad = await sign('c-1', 300, undefined, 'mutp-proxy', { net });
    expect(await verifier.verify(bad)).toEqual({ ok: false, reason: 'invalid' });
  }
});
