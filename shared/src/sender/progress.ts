/**
 * The client's progress as this source knows it from feedback: the DoF it has of each unit, and
 * this source's window, the `windowUnits` units from the lowest one it still misses (wMin), with
 * the time each unit entered it.
 */
import { Layout } from '../layout';
import { FeedbackMessage, MessageType } from '../wire';
import { SlotOwnership } from './ownership';
import { SentPackets } from './sent-packets';

export class ClientProgress {
  wMin: number;
  /** min(wMin + windowUnits, unitCount), kept with wMin (the schedulers read it per unit). */
  windowEnd: number;
  readonly ranks: Uint16Array; // client's DoF per unit, as last reported
  readonly enteredAt: Float64Array; // when each unit entered this source's window

  /** `completeBelow`: units a resuming client already has (0 for a new transfer). */
  constructor(
    private readonly layout: Layout,
    private readonly windowUnits: number,
    private readonly owners: SlotOwnership,
    private readonly sent: SentPackets,
    completeBelow: number,
    now: number,
  ) {
    const { unitCount } = layout;
    this.ranks = new Uint16Array(unitCount);
    this.enteredAt = new Float64Array(unitCount);
    this.wMin = Math.min(completeBelow, unitCount);
    for (let u = 0; u < this.wMin; u++) this.ranks[u] = layout.unitSize(u);
    this.windowEnd = Math.min(this.wMin + windowUnits, unitCount);
    this.enteredAt.fill(now, this.wMin, this.windowEnd);
  }

  /**
   * Client progress grows: completed units below wMin, then the window's bitmap or ranks. Only
   * when a check unit fails its digest does the client discard what it had of it: the newest
   * feedback with the rewind flag may then lower wMin and ranks, and this source sends again.
   * Units the feedback shows begun are pinned to the partition they began under.
   */
  apply(m: FeedbackMessage, rewind: boolean, now: number): void {
    const { layout } = this;
    const { unitCount } = layout;
    const wMin = Math.min(m.wMin, unitCount);
    const oldEnd = this.windowEnd;
    if (rewind && wMin < this.wMin) this.wMin = wMin;
    for (let u = this.wMin; u < wMin; u++) this.ranks[u] = layout.unitSize(u);
    if (m.type === MessageType.FeedbackUncoded) {
      for (let i = 0; i < m.bitCount && wMin + i < unitCount; i++)
        this.report(wMin + i, (m.bitmap[i >> 3] >> (i & 7)) & 1, rewind);
    } else if (m.type === MessageType.FeedbackRlnc) {
      for (let i = 0; i < m.ranks.length && wMin + i < unitCount; i++) {
        const u = wMin + i;
        this.report(u, Math.min(m.ranks[i], layout.unitSize(u)), rewind);
      }
    } else {
      // Fountain: what the client still needs. A block is done only when it says 0 (it may need
      // a few blocks beyond the symbol count), so rank = size - missing stays below size till then.
      for (let i = 0; i < m.missing.length && wMin + i < unitCount; i++) {
        const u = wMin + i;
        this.report(u, Math.max(0, layout.unitSize(u) - m.missing[i]), rewind);
      }
    }
    while (this.wMin < unitCount && this.ranks[this.wMin] >= layout.unitSize(this.wMin)) this.wMin++;
    this.windowEnd = Math.min(this.wMin + this.windowUnits, unitCount);
    this.enteredAt.fill(now, oldEnd, this.windowEnd);
  }

  private report(unit: number, rank: number, rewind: boolean): void {
    if (rank > 0) this.owners.pin(unit);
    if (rank > this.ranks[unit]) this.ranks[unit] = rank;
    else if (rewind && rank < this.ranks[unit]) {
      this.ranks[unit] = rank;
      this.sent.forgetDelivered(unit);
    }
  }
}
