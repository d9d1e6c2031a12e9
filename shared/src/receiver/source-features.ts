/**
 * What the receiver may send each source (docs/protocol.md §13): the features both it and that
 * source understand. A source's set is what origo's offer declared (none declared: the legacy
 * set), replaced by what its META's extension block declares once one arrives. A source's word
 * only ever shapes what is sent to that source: no check is relaxed for it (a source that claims
 * less is sent less; one that claims more than it has drops what it cannot read, as before).
 */
import {
  ALL_CAPABILITIES,
  Capabilities,
  capabilityExtension,
  extensionCapabilities,
  Feature,
  hasFeature,
  LEGACY_CAPABILITIES,
  MetaMessage,
  Mode,
  SchedulerName,
} from '../wire';

/** The scheduler a source that does not run `partitioned` is asked for instead (fountain has none). */
const WITHOUT_PARTITIONED: Record<Mode, SchedulerName | undefined> = {
  uncoded: 'random',
  rlnc: 'rarest',
  fountain: undefined,
};

export class SourceFeatures {
  private readonly declared: Capabilities[];
  /** Our own set's extension block, made once. */
  private readonly ownExtension: Uint8Array;

  constructor(
    private readonly own: Capabilities = ALL_CAPABILITIES,
    declared: readonly (Capabilities | undefined)[] = [],
    sourceCount: number,
  ) {
    this.declared = Array.from({ length: sourceCount }, (_, i) => declared[i] ?? LEGACY_CAPABILITIES);
    this.ownExtension = capabilityExtension(own);
  }

  /** Both this client and source `index` understand `feature`. */
  shared(index: number, feature: Feature): boolean {
    return hasFeature(this.own & this.declared[index], feature);
  }

  /**
   * The feature of a META this client does not read, if any: a client with it switched off drops
   * the META as the release before it would (an older decoder rejects it).
   */
  unreadable(m: MetaMessage): Feature | undefined {
    const uses: [boolean, Feature][] = [
      [m.extensions !== undefined, 'extensions'],
      [m.attributes?.range !== undefined, 'ranges'],
      [m.attributes?.contentType !== undefined, 'attributes'],
      [m.signed !== undefined, 'signatures'],
    ];
    return uses.find(([used, feature]) => used && !hasFeature(this.own, feature))?.[1];
  }

  /** Source `index`'s META: its extension block, if any, says what it understands now. */
  onMeta(index: number, m: MetaMessage): void {
    const declared = m.extensions && extensionCapabilities(m.extensions);
    if (declared !== undefined) this.declared[index] = declared;
  }

  /**
   * The META as agreement compares it: without a Content-Type while some source does not declare
   * `attributes` (its META legitimately has none, and the sources would seem to disagree). The
   * object is then delivered without one; its bytes are checked exactly as before.
   */
  forAgreement(m: MetaMessage): MetaMessage {
    const type = m.attributes?.contentType;
    if (type === undefined || this.declared.every((_, i) => this.shared(i, 'attributes'))) return m;
    const range = m.attributes?.range;
    return { ...m, attributes: range ? { range } : undefined };
  }

  /** The extension block for a REQUEST to source `index` (our set), where both read one. */
  requestExtensions(index: number): Uint8Array | undefined {
    return this.shared(index, 'extensions') ? this.ownExtension : undefined;
  }

  /** The scheduler to ask source `index` for: `scheduler`, or the mode's other one if it lacks partitioned. */
  schedulerFor(index: number, scheduler: SchedulerName, mode: Mode): SchedulerName | undefined {
    if (scheduler !== 'partitioned' || this.shared(index, 'partitioned')) return scheduler;
    return WITHOUT_PARTITIONED[mode];
  }

  /** Why source `index` cannot serve this request at all (a range it cannot read, a mode it cannot schedule). */
  unusable(index: number, ranged: boolean, scheduler: SchedulerName, mode: Mode): string | undefined {
    if (ranged && !this.shared(index, 'ranges')) return 'does not declare byte ranges';
    if (!this.schedulerFor(index, scheduler, mode)) return `does not declare the partitioned scheduler ${mode} needs`;
    return undefined;
  }
}
