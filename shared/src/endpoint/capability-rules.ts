/**
 * The source's side of capability negotiation (docs/protocol.md §13): what its client declared
 * (the REQUEST's extension block; nothing declared is the legacy set), what a source with
 * features switched off does with a datagram that uses one (it drops it, as the older decoder
 * it emulates would reject it), and what its META may carry for that client.
 */
import { ObjectAttributes } from '../range';
import {
  Capabilities,
  capabilityExtension,
  extensionCapabilities,
  Feature,
  hasFeature,
  LEGACY_CAPABILITIES,
  Message,
  MessageType,
  RequestMessage,
  withoutFeatures,
} from '../wire';

/** A source's own set: every feature but those switched off. */
export function ownCapabilities(disabled: readonly Feature[] = []): Capabilities {
  return withoutFeatures(disabled);
}

/** What the client of a REQUEST declared it understands. */
export function clientCapabilities(request: RequestMessage): Capabilities {
  return (request.extensions && extensionCapabilities(request.extensions)) ?? LEGACY_CAPABILITIES;
}

/**
 * The feature of `m` a source with `own` does not understand, if any: such a source drops the
 * datagram unanswered, as the release before that feature rejects it (malformed).
 */
export function unknownFeature(m: Message, own: Capabilities): Feature | undefined {
  if (m.type === MessageType.SymbolDigestsRequest)
    return hasFeature(own, 'symbol-digests') ? undefined : 'symbol-digests';
  if (m.type !== MessageType.Request) return undefined;
  const uses: [boolean, Feature][] = [
    [m.extensions !== undefined, 'extensions'],
    [m.range !== undefined, 'ranges'],
    [m.weights !== undefined, 'weights'],
    [m.resume !== undefined, 'resume'],
    [m.scheduler === 'partitioned', 'partitioned'],
  ];
  return uses.find(([used, feature]) => used && !hasFeature(own, feature))?.[1];
}

/** What a META to this client carries beyond the identity: only what both sides understand. */
export interface MetaShape {
  attributes?: ObjectAttributes;
  /** Sign it (the source has a key). */
  signed: boolean;
  /** The extension block declaring the source's own capabilities. */
  extensions?: Uint8Array;
}

export function metaShape(
  request: RequestMessage,
  own: Capabilities,
  attributes: ObjectAttributes | undefined,
  hasSigner: boolean,
): MetaShape {
  const both = own & clientCapabilities(request);
  // A ranged REQUEST is answered with its ranged attributes whatever else is declared: the client
  // that asked for a range reads them (and a source without ranges never got this far).
  const kept: ObjectAttributes | undefined = hasFeature(both, 'attributes')
    ? attributes
    : attributes?.range && { range: attributes.range };
  return {
    ...(kept && (kept.range || kept.contentType !== undefined) ? { attributes: kept } : {}),
    signed: hasSigner && hasFeature(both, 'signatures'),
    ...(hasFeature(both, 'extensions') ? { extensions: capabilityExtension(own) } : {}),
  };
}
