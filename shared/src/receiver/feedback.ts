/**
 * The FEEDBACK datagram for one source: the acks of its data, what the window still misses, the
 * sources' shares and this source's in-flight cap.
 */
import { UNLIMITED_IN_FLIGHT } from '../limits';
import {
  encodeFeedbackFountain,
  encodeFeedbackRlnc,
  encodeFeedbackUncoded,
  FeedbackCommon,
  Mode,
  NO_SEQ,
} from '../wire';
import { WindowReport } from './completion';
import { Source } from './source';

export interface FeedbackInput {
  transferId: number;
  mode: Mode;
  source: Source;
  /** The delivery rate to report (bytes/s): the source's estimate, or less (handled-rate.ts). */
  rateBps: number;
  /** The source's META is agreed and decoding has started. */
  metaKnown: boolean;
  rewind: boolean;
  wMin: number;
  weights: Uint8Array;
  /** The window as decoding sees it; undefined before decoding started (nothing to report). */
  report: WindowReport | undefined;
  /** This source's in-flight cap given the DoF the window misses. */
  capFor: (windowMissing: number) => number;
  now: number;
}

export function encodeSourceFeedback(f: FeedbackInput): Uint8Array {
  const acks = f.source.acks;
  const common: FeedbackCommon = {
    transferId: f.transferId,
    metaKnown: f.metaKnown,
    rewind: f.rewind,
    complete: false,
    largestSeq: acks.largestSeq < 0 ? NO_SEQ : acks.largestSeq,
    ackDelay: acks.largestSeq < 0 ? 0 : (f.now - acks.largestSeqAt) * 10,
    ackBits: acks.ackBits,
    rateBps: f.rateBps,
    inFlightCap: UNLIMITED_IN_FLIGHT,
    weights: f.weights,
    wMin: f.wMin,
  };
  const report = f.report;
  if (!report) {
    if (f.mode === 'uncoded') return encodeFeedbackUncoded({ ...common, bitmap: new Uint8Array(0), bitCount: 0 });
    if (f.mode === 'rlnc') return encodeFeedbackRlnc({ ...common, ranks: new Uint8Array(0) });
    return encodeFeedbackFountain({ ...common, missing: new Uint16Array(0) });
  }
  common.inFlightCap = f.capFor(report.missingDof);
  if (report.mode === 'uncoded')
    return encodeFeedbackUncoded({ ...common, bitmap: report.bitmap, bitCount: report.bitCount });
  if (report.mode === 'fountain') return encodeFeedbackFountain({ ...common, missing: report.missing });
  return encodeFeedbackRlnc({ ...common, ranks: report.ranks });
}
