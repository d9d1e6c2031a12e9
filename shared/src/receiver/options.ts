/**
 * What a Receiver is asked to download and how (the request it sends, the codec, the sources'
 * keys), checked once when it is made; the configuration in force; and whether a source's META
 * answers that request.
 */
import { VerifySignature } from '../assertion';
import { Codec } from '../codec/types';
import { MAX_OBJECT_BYTES, MAX_SOURCES } from '../limits';
import { DEFAULT_SCHEDULER, schedulerSupports } from '../modes';
import { ByteRange, rangeProblem, servedRangeProblem } from '../range';
import { Capabilities, hasFeature, MetaMessage, Mode, SchedulerName } from '../wire';
import { DEFAULT_RECEIVER_CONFIG, ReceiverConfig } from './config';
import { SourceSigner } from './meta-signatures';
import type { SourceOperatorOptions } from './quorum';

export interface ReceiverOptions extends SourceOperatorOptions {
  transferId: number;
  url: string;
  mode: Mode;
  scheduler?: SchedulerName;
  sourceCount: number;
  /** Strict moving window in packets (paper's w). */
  window: number;
  generationSize: number;
  symbolSize: number;
  codec: Codec;
  now: number;
  /** Ask the sources for these bytes of the resource only (see range.ts). */
  range?: ByteRange;
  /** Each source's upload capacity in bytes/s, when known (origo's ProxyInfo capacityBps; 0 = unknown). */
  capacityHints?: readonly number[];
  config?: Partial<ReceiverConfig>;
  /** SHA-256 used to verify the object; defaults to a portable one, Node hosts pass node:crypto's. */
  sha256?: (data: Uint8Array) => Uint8Array;
  /**
   * Per source, the key origo published for it: such a source's META counts only when that key
   * signed it (meta-signatures.ts). Undefined entries (and no array) are unsigned sources.
   */
  signers?: readonly (SourceSigner | undefined)[];
  /** Ed25519 verification (default portable; Node hosts pass node:crypto's). */
  verifySignature?: VerifySignature;
  /** How errors name each source (the proxy's name); default `#<index>`. */
  sourceNames?: readonly string[];
  /**
   * The optional features this client understands (docs/protocol.md §13); default all. Fewer
   * emulate a client one release behind (tests, rolling upgrades).
   */
  capabilities?: Capabilities;
  /**
   * Per source, the features it declared (origo's offer); undefined entries (and no array): the
   * legacy set. The receiver sends each source only what both understand.
   */
  sourceCapabilities?: readonly (Capabilities | undefined)[];
  /**
   * The host's count of received messages it dropped unread so far, all transfers together (a
   * monotonic count; node-rtc's receive budget): while it grows, the client and not the path is
   * the bottleneck, and each source is told the rate its data is handled at (handled-rate.ts).
   * Absent: the host hands on everything it receives (the simulator, the browser).
   */
  receiveDrops?: () => number;
}

/** The scheduler the options name, or the mode's default; throws RangeError for options that make no download. */
export function checkReceiverOptions(opts: ReceiverOptions): SchedulerName {
  if (!Number.isInteger(opts.sourceCount) || opts.sourceCount < 1 || opts.sourceCount > MAX_SOURCES) {
    throw new RangeError(`sourceCount must be in [1, ${MAX_SOURCES}]`);
  }
  const scheduler = opts.scheduler ?? DEFAULT_SCHEDULER[opts.mode];
  if (!schedulerSupports(opts.mode, scheduler)) {
    throw new RangeError(`scheduler ${scheduler} does not support mode ${opts.mode}`);
  }
  if (opts.codec.mode !== opts.mode) throw new RangeError(`codec ${opts.codec.name} is not for mode ${opts.mode}`);
  const badRange = opts.range && rangeProblem(opts.range);
  if (badRange) throw new RangeError(badRange);
  if (opts.signers && opts.signers.length !== opts.sourceCount)
    throw new RangeError(`${opts.signers.length} signers for ${opts.sourceCount} sources`);
  if (opts.signers?.some((s) => s) && opts.capabilities !== undefined && !hasFeature(opts.capabilities, 'signatures'))
    throw new RangeError('keys to check signed METAs given to a client that does not declare signatures');
  if (opts.sourceOperators && opts.sourceOperators.length !== opts.sourceCount)
    throw new RangeError(`${opts.sourceOperators.length} operators for ${opts.sourceCount} sources`);
  if (opts.sourceCapabilities && opts.sourceCapabilities.length !== opts.sourceCount)
    throw new RangeError(`${opts.sourceCapabilities.length} capability sets for ${opts.sourceCount} sources`);
  return scheduler;
}

/** The defaults, overridden by the options' config; the object limit never above MAX_OBJECT_BYTES. */
export function receiverConfig(opts: ReceiverOptions, scheduler: SchedulerName): ReceiverConfig {
  const config = { ...DEFAULT_RECEIVER_CONFIG, ...opts.config };
  config.maxObjectBytes = Math.min(config.maxObjectBytes, MAX_OBJECT_BYTES);
  config.inFlightCaps ??= scheduler === 'partitioned';
  return config;
}

/** Why a META does not answer the request (its source is then a polluter): another layout, or other bytes. */
export function metaMismatch(asked: ReceiverOptions, m: MetaMessage): string | undefined {
  if (m.mode !== asked.mode || m.symbolSize !== asked.symbolSize || m.generationSize !== asked.generationSize)
    return 'metadata does not match the request';
  return rangeMismatch(asked.range, m);
}

/** Why a META's bytes are not the range asked for (a ranged answer to an unranged request too). */
function rangeMismatch(asked: ByteRange | undefined, m: MetaMessage): string | undefined {
  const served = m.attributes?.range;
  if (!asked) return served ? 'served a range of an object asked for whole' : undefined;
  if (!served) return 'served without the range asked for';
  const problem = servedRangeProblem(asked, served, m.objectLength);
  return problem ? `served a different range: ${problem}` : undefined;
}
