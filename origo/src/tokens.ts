/**
 * Client tokens: short-lived EdDSA (Ed25519) JWTs whose subject is the client id. Origo signs
 * them with its private key; proxies verify them offline with the public key they get in
 * `registered` (or from GET /v1/keys). A client presents its previous token in `hello` to keep
 * its identity across reconnects, so per-client limits follow the client, not the socket.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { errors, jwtVerify, SignJWT } from 'jose';
import { NETWORK_CLAIM, proxyTokenAudience, TokenPublicKey, tokenPublicKey } from '@mutp/shared';

export const TOKEN_ISSUER = 'mutp-origo';
export const TOKEN_AUDIENCE = 'mutp-proxy';

export interface IssuedToken {
  token: string;
  expiresAt: number;
}

export class TokenIssuer {
  readonly publicJwk: TokenPublicKey;
  private readonly privateKey: KeyObject;
  private readonly publicKey: KeyObject;

  /**
   * @param keyFile PEM (PKCS#8) Ed25519 private key; a fresh pair is generated when absent (tokens
   *   then die with the process, which only costs clients a new identity).
   */
  constructor(
    readonly ttlMs: number,
    keyFile?: string,
  ) {
    if (keyFile !== undefined) {
      this.privateKey = createPrivateKey(readFileSync(keyFile));
      if (this.privateKey.asymmetricKeyType !== 'ed25519') throw new Error(`${keyFile}: not an Ed25519 private key`);
      this.publicKey = createPublicKey(this.privateKey);
    } else {
      ({ privateKey: this.privateKey, publicKey: this.publicKey } = generateKeyPairSync('ed25519'));
    }
    const jwk = this.publicKey.export({ format: 'jwk' });
    this.publicJwk = tokenPublicKey.parse({ kty: jwk.kty, crv: jwk.crv, x: jwk.x, alg: 'EdDSA', kid: jwk.x });
  }

  /**
   * The client's session token (audience TOKEN_AUDIENCE: what `hello` keeps the identity with) or,
   * with `proxyId`, its token for that proxy only (`proxyTokenAudience`), which `subject` refuses.
   * `network` (claim `net`) is the network origo saw the client in (addressPrefix): proxies share
   * their resources per network, and only origo can vouch for it on a QUIC or HTTP request.
   */
  async issue(clientId: string, now = Date.now(), proxyId?: string, network?: string): Promise<IssuedToken> {
    const expiresAt = now + this.ttlMs;
    const token = await new SignJWT(network === undefined ? {} : { [NETWORK_CLAIM]: network })
      .setProtectedHeader({ alg: 'EdDSA', kid: this.publicJwk.kid })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(proxyId === undefined ? TOKEN_AUDIENCE : proxyTokenAudience(proxyId))
      .setSubject(clientId)
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor(expiresAt / 1000))
      .sign(this.privateKey);
    return { token, expiresAt: Math.floor(expiresAt / 1000) * 1000 };
  }

  /**
   * The client id of a token origo signed, or undefined. `graceMs` accepts a token expired that
   * recently (a client reconnecting after a pause keeps its identity; proxies never get a grace).
   */
  async subject(token: string, graceMs: number): Promise<string | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.publicKey, {
        issuer: TOKEN_ISSUER,
        audience: TOKEN_AUDIENCE,
        algorithms: ['EdDSA'],
        clockTolerance: Math.floor(graceMs / 1000),
      });
      return payload.sub;
    } catch (e) {
      if (e instanceof errors.JOSEError) return undefined;
      throw e;
    }
  }
}
