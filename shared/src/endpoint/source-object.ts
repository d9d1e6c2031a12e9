/**
 * An object a source serves, as the caller's cache hands it to the endpoint, and what its META
 * says of it besides length and digest (Content-Type, where a range sits in the resource).
 */
import { AssertionProvenance } from '../assertion';
import { ObjectAttributes, servedRangeProblem, validContentType } from '../range';
import { RequestMessage } from '../wire';
import { LayoutDigests } from './layout-digests';
import { SharedEncoders } from './shared-encoders';

/** An object ready to serve, as the caller's cache holds it. */
export interface SourceObject {
  bytes: Uint8Array;
  /** SHA-256 of bytes (reported in META). */
  digest: Uint8Array;
  /** Encoders shared by every transfer of this object. */
  encoders: SharedEncoders;
  /** Unit digests per layout, shared likewise (absent: each Sender hashes the object itself). */
  digests?: LayoutDigests;
  /** False when no cache accounts for the bytes: the transfer is charged for them. */
  cached: boolean;
  /** Marks the transfer as a user of the bytes until the returned function is called. */
  hold?(): () => void;
  /** The origin's Content-Type (validContentType), reported in META. */
  contentType?: string;
  /** For a ranged REQUEST: where the bytes sit in the resource (servedRangeProblem must pass). */
  range?: { start: number; completeLength?: number };
  /** When the bytes came from the origin and its validator: what a signed META asserts of them. */
  provenance?: AssertionProvenance;
}

/**
 * META's attributes for a served object, or why it does not answer the REQUEST: a ranged REQUEST
 * needs the bytes it named (a caller's bug otherwise, reported as an internal error).
 */
export function attributesFor(request: RequestMessage, object: SourceObject): ObjectAttributes | string {
  const attributes: ObjectAttributes = {};
  if (object.contentType !== undefined && validContentType(object.contentType))
    attributes.contentType = object.contentType;
  if (request.range) {
    if (!object.range) return 'the object was served without its range';
    const problem = servedRangeProblem(request.range, object.range, object.bytes.length);
    if (problem) return `the origin's range does not match the request: ${problem}`;
    attributes.range =
      object.range.completeLength === undefined
        ? { start: object.range.start }
        : { start: object.range.start, completeLength: object.range.completeLength };
  }
  return attributes;
}
