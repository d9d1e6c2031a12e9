/**
 * Verifies origo's client tokens offline: EdDSA JWTs (issuer mutp-origo) signed with the key
 * origo sends in `registered` (the registration link is already trusted). The audience is this
 * proxy's own (`proxyTokenAudience(proxyId)`, what origo hands clients with each offer) or, from
 * clients of an older origo, the general mutp-proxy; another proxy's token is refused, so a
 * proxy cannot spend at others the tokens its clients gave it.
 * The subject is the client id: per-client limits key on it, so a client keeps its budget across
 * sockets and cannot multiply it by reconnecting. The `net` claim is the network origo saw the
 * client in: per-network shares key on it, as client ids are free. Until origo has given a key,
 * every token is refused (fail closed).
 */
import { errors, importJWK, jwtVerify, KeyLike } from 'jose';
import { NETWORK_CLAIM, proxyTokenAudience, type TokenPublicKey } from '@mutp/shared';

export const TOKEN_ISSUER = 'mutp-origo';
export const TOKEN_AUDIENCE = 'mutp-proxy';

export type TokenCheck =
  | { ok: true; clientId: string; /** Absent in tokens of an older origo. */ network?: string }
  | { ok: false; reason: 'missing' | 'invalid' | 'no-key' };

export class ClientTokenVerifier {
  private key?: KeyLike | Uint8Array;
  private jwkX?: string;
  private audiences: string[] = [TOKEN_AUDIENCE];

  /** This proxy's id (from `registered`): tokens for it alone are accepted from then on. */
  setProxyId(proxyId: string): void {
    this.audiences = [TOKEN_AUDIENCE, proxyTokenAudience(proxyId)];
  }

  get hasKey(): boolean {
    return this.key !== undefined;
  }

  /** Installs origo's public key (again on every registration: origo may have restarted with a new one). */
  async setKey(jwk: TokenPublicKey): Promise<void> {
    if (jwk.x === this.jwkX) return;
    this.key = await importJWK({ ...jwk, alg: 'EdDSA' }, 'EdDSA');
    this.jwkX = jwk.x;
  }

  async verify(token: string | undefined): Promise<TokenCheck> {
    if (token === undefined || token === '') return { ok: false, reason: 'missing' };
    if (this.key === undefined) return { ok: false, reason: 'no-key' };
    try {
      const { payload } = await jwtVerify(token, this.key, {
        issuer: TOKEN_ISSUER,
        audience: this.audiences,
        algorithms: ['EdDSA'],
      });
      if (typeof payload.sub !== 'string' || payload.sub === '') return { ok: false, reason: 'invalid' };
      const network = payload[NETWORK_CLAIM];
      if (network !== undefined && (typeof network !== 'string' || network === '' || network.length > 64))
        return { ok: false, reason: 'invalid' };
      return { ok: true, clientId: payload.sub, ...(network !== undefined ? { network } : {}) };
    } catch (e) {
      if (e instanceof errors.JOSEError) return { ok: false, reason: 'invalid' };
      throw e;
    }
  }
}

/** The token of an `Authorization: Bearer <token>` header. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Bearer\s+([A-Za-z0-9_.-]{1,2048})\s*$/i.exec(header);
  return match?.[1];
}
