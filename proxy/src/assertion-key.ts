/**
 * The proxy's assertion key: an Ed25519 key pair made at start-up, whose public half goes to
 * origo in `register` and from there to every client offered this proxy. The proxy signs each
 * META's assertion with it, and each `/v1/http` answer's (shared/src/assertion.ts), so what it
 * says about an object is evidence a client can hand on. The private half never leaves this
 * process; a restart makes a new pair (nothing signed before needs it: statements are checked
 * against the key origo holds now).
 */
import { generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import { type MetaSigner, signHttpAnswer } from '@mutp/shared';
import { sha256 } from './cache-entry';
import type { SignAnswer } from './http-baseline';

export class AssertionKey {
  private readonly privateKey: KeyObject;
  /** The public key as origo and clients take it: 32 raw bytes, base64url (JWK `x`). */
  readonly publicKey: string;

  constructor() {
    const pair = generateKeyPairSync('ed25519');
    this.privateKey = pair.privateKey;
    const jwk = pair.publicKey.export({ format: 'jwk' });
    if (typeof jwk.x !== 'string') throw new Error('node:crypto gave an Ed25519 public key without x');
    this.publicKey = jwk.x;
  }

  /** A signer naming the proxy by the id origo gave it (asked at each signature: it can change). */
  signer(proxyId: () => string | undefined): MetaSigner {
    const privateKey = this.privateKey;
    return {
      get proxyId() {
        return proxyId() ?? '';
      },
      sign: (message) => new Uint8Array(sign(null, message, privateKey)),
    };
  }

  /** Signs `/v1/http` answers (x-mutp-meta) as `signer(proxyId)` signs METAs. */
  answerSigner(proxyId: () => string | undefined): SignAnswer {
    const signer = this.signer(proxyId);
    return (answer, request) => signHttpAnswer(answer, request, signer, sha256);
  }
}
