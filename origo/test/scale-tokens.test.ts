/**
 * Tokens (tokens.ts, signed with jose) are what proxies verify, claim for claim: header, issuer,
 * audience per proxy, subject, network and lifetime; a changed signature or payload is refused.
 */
import { importJWK, jwtVerify } from 'jose';
import { NETWORK_CLAIM, proxyTokenAudience } from '@mutp/shared';
import { TOKEN_AUDIENCE, TOKEN_ISSUER, TokenIssuer } from '../src/tokens';

const issuer = new TokenIssuer(60_000);
const now = 1_800_000_000_000;

async function verified(token: string, audience: string) {
  const key = await importJWK(issuer.publicJwk, 'EdDSA');
  return jwtVerify(token, key, { issuer: TOKEN_ISSUER, audience, algorithms: ['EdDSA'], currentDate: new Date(now) });
}

test('a session token verifies with jose and carries the client, its network and its lifetime', async () => {
  const issued = await issuer.issue('c-abc', now, undefined, '203.0.113.0/24');
  const { payload, protectedHeader } = await verified(issued.token, TOKEN_AUDIENCE);
  expect(protectedHeader).toEqual({ alg: 'EdDSA', kid: issuer.publicJwk.kid });
  expect(payload).toEqual({
    [NETWORK_CLAIM]: '203.0.113.0/24',
    iss: TOKEN_ISSUER,
    aud: TOKEN_AUDIENCE,
    sub: 'c-abc',
    iat: now / 1000,
    exp: (now + 60_000) / 1000,
  });
  expect(issued.expiresAt).toBe(now + 60_000);
  await expect(issuer.subject(issued.token, 0)).resolves.toBe('c-abc');
});

test('a per-proxy token is valid at that proxy only and never keeps a session', async () => {
  const issued = await issuer.issue('c-abc', now, 'p-1');
  await expect(verified(issued.token, proxyTokenAudience('p-1'))).resolves.toBeDefined();
  await expect(verified(issued.token, proxyTokenAudience('p-2'))).rejects.toThrow(/aud/);
  await expect(issuer.subject(issued.token, 0)).resolves.toBeUndefined();
});

test('a token whose signature was altered is refused', async () => {
  const { token } = await issuer.issue('c-abc', Date.now());
  const [head, body, sig] = token.split('.');
  const flipped = `${head}.${body}.${sig[0] === 'A' ? 'B' : 'A'}${sig.slice(1)}`;
  await expect(issuer.subject(flipped, 0)).resolves.toBeUndefined();
  const forged = `${head}.${Buffer.from(JSON.stringify({ iss: TOKEN_ISSUER, aud: TOKEN_AUDIENCE, sub: 'c-x', exp: 9e9 })).toString('base64url')}.${sig}`;
  await expect(issuer.subject(forged, 0)).resolves.toBeUndefined();
});
