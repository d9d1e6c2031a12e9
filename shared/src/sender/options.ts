/** What a Sender is built from (the host's side of its constructor). */
import { AssertionProvenance } from '../assertion';
import { Codec } from '../codec/types';
import { Sha256 } from '../integrity';
import { ObjectAttributes } from '../range';
import { Random } from '../random';
import { RequestMessage } from '../wire';
import { SenderConfig } from './config';

export interface SenderOptions {
  request: RequestMessage;
  object: Uint8Array;
  /** SHA-256 of the object, reported to the client in META. */
  digest: Uint8Array;
  /**
   * The object's unit digests for this request's layout (integrity.ts `unitDigests(object,
   * new Layout(mode, object.length, symbolSize, generationSize))`). Optional: computed here when
   * absent; a cache serving many transfers of one object computes it once per layout and passes it.
   */
  unitDigests?: Uint8Array;
  /** The origin's Content-Type and, for a ranged REQUEST, where the object sits: reported in META. */
  attributes?: ObjectAttributes;
  /** SHA-256 for the unit digests when they are computed here (Node hosts pass node:crypto's). */
  sha256?: Sha256;
  /** Signs what META asserts (assertion.ts) with the source's key; META goes unsigned without it. */
  signer?: MetaSigner;
  /** The extension block META carries (the source's capabilities, §4.8); none without it. */
  metaExtensions?: Uint8Array;
  /** When and with which validator the object came from the origin: part of the signed assertion. */
  provenance?: AssertionProvenance;
  codec: Codec;
  random: Random;
  now: number;
  config?: Partial<SenderConfig>;
  /**
   * Where DATA datagrams are built (see `Sender.datagramBuffer`); default: a new array each.
   */
  datagramBuffer?: Uint8Array;
  /**
   * What the previous transfer on the same connection learnt of the path (its last reported rate
   * and its minimum RTT): the in-flight limit starts there instead of at initialWindowPackets,
   * so a new download does not spend its first round trips growing the window again.
   */
  warmStart?: PathEstimate;
}

/** A source's view of its path to the client: the client's reported rate and the minimum RTT. */
export interface PathEstimate {
  rateBps: number;
  minRttMs: number;
}

/** A source's signing key, as its host holds it (the Sender never sees the private key). */
export interface MetaSigner {
  /** The id origo knows the source by: the statement names it. */
  readonly proxyId: string;
  /** An Ed25519 signature (64 bytes) over `message`. */
  sign(message: Uint8Array): Uint8Array;
}
