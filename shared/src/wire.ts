/**
 * MUTP wire format, version 1. Byte layouts are specified in docs/protocol.md; this file is the
 * reference implementation. All integers are big-endian. Decoding never throws and never
 * allocates more than the datagram it was given: fields are range-checked before use and
 * payloads are views into the input.
 */
import { err, ok, Result, WireError } from './errors';
import {
  DIGEST_BYTES,
  MAX_DATAGRAM_BYTES,
  MAX_ERROR_MESSAGE_BYTES,
  MAX_FEEDBACK_BLOCKS,
  MAX_FEEDBACK_GENERATIONS,
  MAX_GENERATION_SIZE,
  MAX_OBJECT_BYTES,
  MAX_SOURCES,
  MAX_SYMBOL_SIZE,
  MAX_URL_BYTES,
  MAX_WINDOW,
  MIN_SYMBOL_SIZE,
  PROTOCOL_VERSION,
  UNIT_DIGEST_BYTES,
} from './limits';
import {
  ByteRange,
  MAX_CONTENT_TYPE_BYTES,
  MAX_RANGE_OFFSET,
  ObjectAttributes,
  rangeProblem,
  validContentType,
} from './range';

export const MessageType = {
  Request: 0x01,
  Meta: 0x02,
  DataUncoded: 0x03,
  DataRlnc: 0x04,
  DataFountain: 0x05,
  Digests: 0x06,
  SymbolDigests: 0x07,
  /** The source took the REQUEST and is still getting the object from the origin (§4.2c). */
  Fetching: 0x08,
  FeedbackUncoded: 0x10,
  FeedbackRlnc: 0x11,
  FeedbackFountain: 0x12,
  SymbolDigestsRequest: 0x13,
  Stop: 0x20,
  Error: 0x21,
} as const;

export type Mode = 'uncoded' | 'rlnc' | 'fountain';
export const MODE_IDS: Record<Mode, number> = { uncoded: 0, rlnc: 1, fountain: 2 };
const MODES_BY_ID: readonly Mode[] = ['uncoded', 'rlnc', 'fountain'];

export type SchedulerName = 'random' | 'rarest' | 'partitioned';
export const SCHEDULER_IDS: Record<SchedulerName, number> = { random: 1, rarest: 2, partitioned: 3 };
const SCHEDULERS_BY_ID: Record<number, SchedulerName> = { 1: 'random', 2: 'rarest', 3: 'partitioned' };

export const StopReason = { Complete: 0, Cancelled: 1, BadSource: 2 } as const;
export type StopReasonCode = (typeof StopReason)[keyof typeof StopReason];

export const ErrorCode = {
  OriginNotFound: 1,
  OriginError: 2,
  ObjectTooLarge: 3,
  BadRequest: 4,
  Overloaded: 5,
  Internal: 6,
  Unsupported: 7,
  /** The range starts at or past the end of the resource (the origin answered 416). */
  RangeNotSatisfiable: 8,
  /**
   * The source is shutting down (draining): it finishes the transfers under way and takes no new
   * ones. Sent once per connection with CONNECTION_TRANSFER_ID, and to any later REQUEST.
   */
  GoingAway: 9,
} as const;

/**
 * The transferId of messages about the whole connection, not one transfer (ERROR GoingAway). A
 * client never gives it to a transfer.
 */
export const CONNECTION_TRANSFER_ID = 0;

/** "OriginNotFound" -> "origin not found", by code, from ErrorCode itself. */
const ERROR_CODE_NAMES = new Map<number, string>(
  Object.entries(ErrorCode).map(([name, code]) => [code, name.replace(/(?<!^)([A-Z])/g, ' $1').toLowerCase()]),
);

/** A wire error code for people: "origin not found (1)"; unknown codes as "error 42". */
export function describeErrorCode(code: number): string {
  const name = ERROR_CODE_NAMES.get(code);
  return name ? `${name} (${code})` : `error ${code}`;
}

export const HEADER_BYTES = 6;
export const DATA_UNCODED_HEADER_BYTES = HEADER_BYTES + 8;
export const DATA_RLNC_HEADER_BYTES = HEADER_BYTES + 12;
export const DATA_FOUNTAIN_HEADER_BYTES = HEADER_BYTES + 12;
export const NO_SEQ = 0xffffffff;
export const META_BYTES = HEADER_BYTES + 8 + 2 * DIGEST_BYTES;
/** A REQUEST's optional range: start (u48) and length (u32) after the URL. */
export const REQUEST_RANGE_BYTES = 10;
/** A REQUEST's optional resume part, last: fromUnit (u32), blockRound (u32). */
export const REQUEST_RESUME_BYTES = 8;
/** Bit 7 of a REQUEST's scheduler byte: the resume part ends the message. */
const REQUEST_FLAG_RESUME = 0x80;
/** Bit 6 of a REQUEST's scheduler byte: an extension block precedes the resume part (§4.8). */
const REQUEST_FLAG_EXTENSIONS = 0x40;
/** The scheduler id's bits of that byte. */
const REQUEST_SCHEDULER_MASK = 0x3f;
/**
 * Highest fountain block round a resume part may name (2^24 − 1): with 32 sources the ids it
 * starts from stay below 2^29, far from the u32 limit however long the transfer then runs.
 */
export const MAX_BLOCK_ROUND = 0xffffff;
/** META's optional attributes before the Content-Type: flags, range start (u48), complete length (u48), type length. */
export const META_ATTRIBUTES_BYTES = 14;
const META_FLAG_RANGED = 0x01;
const META_FLAG_COMPLETE_LENGTH = 0x02;
/** A signature block follows the Content-Type (MetaSignature). */
const META_FLAG_SIGNED = 0x04;
/** An extension block ends the message (§4.8). */
const META_FLAG_EXTENSIONS = 0x40;
/** An Ed25519 signature. */
export const SIGNATURE_BYTES = 64;
/** A META signature block without its validator: fetchedAt (u48), kind (u8), length (u8), signature. */
export const META_SIGNATURE_FIXED_BYTES = 8 + SIGNATURE_BYTES;
/** Longest origin validator a signed META carries (a longer one is left out by the source). */
export const MAX_VALIDATOR_BYTES = 128;
const VALIDATOR_KINDS: readonly (ValidatorKind | undefined)[] = [undefined, 'etag', 'last-modified'];
export const DIGESTS_HEADER_BYTES = HEADER_BYTES + 6;
/** Unit digests one DIGESTS datagram carries: 1036 bytes, within one SCTP packet at the default MTU. */
export const MAX_DIGESTS_PER_MESSAGE = 64;
/** SYMBOL_DIGESTS: header, check (u32), first (u8), count (u8). */
export const SYMBOL_DIGESTS_HEADER_BYTES = HEADER_BYTES + 6;
/** SYMBOL_DIGESTS_REQUEST: header, check (u32). */
export const SYMBOL_DIGESTS_REQUEST_BYTES = HEADER_BYTES + 4;
/** FETCHING without its signature: header, flags (u8), answerWithinMs (u32). */
export const FETCHING_BYTES = HEADER_BYTES + 5;
/** FETCHING flag bit 0: a signature by the source's assertion key ends the message. */
const FETCHING_FLAG_SIGNED = 0x01;

export interface RequestMessage {
  type: typeof MessageType.Request;
  transferId: number;
  mode: Mode;
  scheduler: SchedulerName;
  sourceIndex: number;
  sourceCount: number;
  window: number;
  generationSize: number;
  symbolSize: number;
  url: string;
  /** Serve only these bytes of the resource (absent: the whole object). */
  range?: ByteRange;
  /**
   * The client's weights for the transfer's first slots, one per source (§9.3), until its first
   * FEEDBACK; absent: equal shares. Lets a source start from the share the client expects.
   */
  weights?: Uint8Array;
  /** What a client resuming the transfer already has, so a source that starts it again skips it (§4.1). */
  resume?: RequestResume;
  /**
   * The extension block (§4.8) as sent: type-length-value entries, among them the client's
   * capabilities (`capabilityExtension`, read with `extensionCapabilities`). Only to a source that
   * declared `extensions`; an older one rejects the scheduler byte's bit 6.
   */
  extensions?: Uint8Array;
}

/**
 * A resuming client's progress: every unit below `fromUnit` is complete, and this source index's
 * fountain blocks of rounds below `blockRound` were sent before (ids sourceIndex + N · round).
 */
export interface RequestResume {
  fromUnit: number;
  blockRound: number;
}

export interface MetaMessage {
  type: typeof MessageType.Meta;
  transferId: number;
  objectLength: number;
  symbolSize: number;
  generationSize: number;
  mode: Mode;
  digest: Uint8Array;
  /**
   * SHA-256 over the object's unit digests (see unitDigests in integrity.ts), concatenated in
   * order: lets the client check each check unit as soon as it decodes, not only the whole object.
   */
  unitRoot: Uint8Array;
  /**
   * What the origin said: Content-Type, and for a ranged transfer where the bytes sit in the
   * resource. Part of the identity the sources must agree on (a source cannot relabel the bytes).
   */
  attributes?: ObjectAttributes;
  /**
   * The source's signature over what this META asserts (assertion.ts `assertionMessage`: the
   * proxy, the URL and range asked for, every field above and the origin's validator), with the
   * key origo publishes for it: a lie it signs is evidence anyone can check against the origin.
   */
  signed?: MetaSignature;
  /**
   * The extension block (§4.8) as sent, kept byte for byte (a signature covers it): the source's
   * capabilities among them. Only to a client whose REQUEST carried one.
   */
  extensions?: Uint8Array;
}

/** Which of the origin's validators a source saw: a strong ETag, else Last-Modified. */
export type ValidatorKind = 'etag' | 'last-modified';

export interface OriginValidator {
  kind: ValidatorKind;
  /** Visible ASCII and spaces, at most MAX_VALIDATOR_BYTES. */
  value: string;
}

export interface MetaSignature {
  /** When the source fetched the object from the origin (ms since the epoch; 0 unknown). */
  fetchedAt: number;
  /** The origin's validator of the version the source holds, when the origin sent one. */
  validator?: OriginValidator;
  /** Ed25519 (SIGNATURE_BYTES). */
  signature: Uint8Array;
}

/** Whether a validator fits a signed META: visible ASCII and spaces, 1..MAX_VALIDATOR_BYTES. */
export function validValidator(value: string): boolean {
  return value.length > 0 && value.length <= MAX_VALIDATOR_BYTES && /^[\x20-\x7e]+$/.test(value);
}

/** A run of the object's unit digests (UNIT_DIGEST_BYTES each), verified against META's unitRoot. */
export interface DigestsMessage {
  type: typeof MessageType.Digests;
  transferId: number;
  /** Index of the first check unit in this message. */
  first: number;
  /** count x UNIT_DIGEST_BYTES bytes. */
  digests: Uint8Array;
}

/**
 * Uncoded mode: the symbol digests of one check unit (a run of them from `first`), whose
 * concatenation hashes to that unit's agreed digest. A source sends them only when asked
 * (SYMBOL_DIGESTS_REQUEST, after the unit failed its check): with them the client tells which
 * packets were wrong, so which source polluted, without asking anyone for repeats.
 */
export interface SymbolDigestsMessage {
  type: typeof MessageType.SymbolDigests;
  transferId: number;
  /** The check unit. */
  check: number;
  /** Index within the check unit of the first symbol described. */
  first: number;
  /** count x UNIT_DIGEST_BYTES bytes. */
  digests: Uint8Array;
}

/** Uncoded mode, client to source: send the symbol digests of check unit `check`. */
export interface SymbolDigestsRequestMessage {
  type: typeof MessageType.SymbolDigestsRequest;
  transferId: number;
  check: number;
}

/**
 * Source to client: "I took your REQUEST and am getting the object from the origin; my META comes
 * within `answerWithinMs`" (§4.2c). Sent only to a client that declared `fetching`, in answer to a
 * REQUEST repeated while the object is not there yet. A client holding the source's key counts it
 * only when that key signed it (assertion.ts `fetchingAssertionMessage`); it then waits for that
 * source's META past agreementWaitMs, within its own bound, before it takes an object.
 */
export interface FetchingMessage {
  type: typeof MessageType.Fetching;
  transferId: number;
  /** The longest the source will take to answer (META or ERROR), ms; the client caps it. */
  answerWithinMs: number;
  /** Ed25519 (SIGNATURE_BYTES) by the source's assertion key, when it has one. */
  signature?: Uint8Array;
}

export interface DataUncodedMessage {
  type: typeof MessageType.DataUncoded;
  transferId: number;
  seq: number;
  index: number;
  payload: Uint8Array;
}

export interface DataRlncMessage {
  type: typeof MessageType.DataRlnc;
  transferId: number;
  seq: number;
  generation: number;
  seed: number;
  payload: Uint8Array;
}

export interface DataFountainMessage {
  type: typeof MessageType.DataFountain;
  transferId: number;
  seq: number;
  /** Source block of the object (a unit: FOUNTAIN_BLOCK_SYMBOLS symbols, the last one shorter). */
  block: number;
  /** Fountain block id within that source block: ids below its symbol count are systematic. */
  blockId: number;
  payload: Uint8Array;
}

/** Fields every feedback carries, whatever the mode. */
export interface FeedbackCommon {
  transferId: number;
  metaKnown: boolean;
  complete: boolean;
  /**
   * The client discarded packets of a check unit that failed its digest (docs/protocol.md §6.4):
   * this feedback, if the newest, may report lower ranks or a lower wMin than earlier ones, and
   * the source sends those units again. Absent (false), progress only grows.
   */
  rewind?: boolean;
  /** Highest data sequence number received from this source, or NO_SEQ. */
  largestSeq: number;
  /** Time between receiving largestSeq and sending this feedback, in 100 µs units. */
  ackDelay: number;
  /** Bit i set = data seq largestSeq - 1 - i was received: exact losses for the last 32 packets. */
  ackBits: number;
  /** Receiver's estimate of this source's delivery rate, bytes/s; 0 = no estimate yet. */
  rateBps: number;
  /**
   * Most packets this source should have in flight (UNLIMITED_IN_FLIGHT = no cap). The client lowers
   * it near the end so the sources together send little more than what is still missing.
   */
  inFlightCap: number;
  /** Quantised share of every source (index = sourceIndex); drives the partitioned schedulers. */
  weights: Uint8Array;
  /** Lowest unit (packet or generation) not yet complete. */
  wMin: number;
}

export interface FeedbackUncodedMessage extends FeedbackCommon {
  type: typeof MessageType.FeedbackUncoded;
  /** Bit i (LSB first in each byte) set = packet wMin + i received. */
  bitmap: Uint8Array;
  bitCount: number;
}

export interface FeedbackRlncMessage extends FeedbackCommon {
  type: typeof MessageType.FeedbackRlnc;
  /** ranks[i] = DoF received of generation wMin + i. */
  ranks: Uint8Array;
}

export interface FeedbackFountainMessage extends FeedbackCommon {
  type: typeof MessageType.FeedbackFountain;
  /**
   * missing[i] = blocks the client still needs for source block wMin + i: 0 once decoded, else at
   * least 1 (a fountain decoder may need a few blocks beyond the symbol count).
   */
  missing: Uint16Array;
}

export interface StopMessage {
  type: typeof MessageType.Stop;
  transferId: number;
  reason: StopReasonCode;
}

export interface ErrorMessage {
  type: typeof MessageType.Error;
  transferId: number;
  code: number;
  message: string;
}

export type Message =
  | RequestMessage
  | MetaMessage
  | DigestsMessage
  | SymbolDigestsMessage
  | SymbolDigestsRequestMessage
  | FetchingMessage
  | DataUncodedMessage
  | DataRlncMessage
  | DataFountainMessage
  | FeedbackUncodedMessage
  | FeedbackRlncMessage
  | FeedbackFountainMessage
  | StopMessage
  | ErrorMessage;

export type FeedbackMessage = FeedbackUncodedMessage | FeedbackRlncMessage | FeedbackFountainMessage;

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function header(buf: Uint8Array, type: number, transferId: number): DataView {
  assertU32('transferId', transferId);
  if (buf.length > MAX_DATAGRAM_BYTES)
    throw new RangeError(`message of ${buf.length} bytes exceeds ${MAX_DATAGRAM_BYTES}`);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  buf[0] = PROTOCOL_VERSION;
  buf[1] = type;
  view.setUint32(2, transferId >>> 0);
  return view;
}

function assertRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${value}`);
  }
}

function assertU32(name: string, value: number): void {
  assertRange(name, value, 0, 0xffffffff);
}

function setUint48(v: DataView, at: number, value: number): void {
  v.setUint16(at, Math.floor(value / 2 ** 32));
  v.setUint32(at + 2, value % 2 ** 32);
}

function getUint48(v: DataView, at: number): number {
  return v.getUint16(at) * 2 ** 32 + v.getUint32(at + 2);
}

function modeId(mode: Mode): number {
  const id = MODE_IDS[mode];
  if (id === undefined) throw new RangeError(`unknown mode ${String(mode)}`);
  return id;
}

// ---------------------------------------------------------------- capabilities (§4.8, §13)

/**
 * The optional features of version 1, in bit order: bit i of a capability bitmap is FEATURES[i].
 * A peer declares the ones it understands (origo's registration and offers, the extension block
 * of REQUEST and META) and is sent no other. New features are appended, never reordered.
 */
export const FEATURES = [
  /** REQUEST and META carry an extension block (scheduler bit 6, META flag bit 6): this negotiation. */
  'extensions',
  /** A REQUEST's range and META's ranged attributes (§4.1, §4.2). */
  'ranges',
  /** A REQUEST's initial weights (§4.1). */
  'weights',
  /** A REQUEST's resume part (scheduler bit 7, §4.1). */
  'resume',
  /** META's attributes block (Content-Type; §4.2). */
  'attributes',
  /** Signed METAs (flag bit 2, §4.2). */
  'signatures',
  /** SYMBOL_DIGESTS_REQUEST and SYMBOL_DIGESTS (§4.2b). */
  'symbol-digests',
  /** The partitioned scheduler (id 3, §9.3). */
  'partitioned',
  /** FETCHING: a source still getting the object says so, and the client waits for its META (§4.2c). */
  'fetching',
] as const;
export type Feature = (typeof FEATURES)[number];
/** A set of features as a bitmap (bit i = FEATURES[i]). */
export type Capabilities = number;

/** The bit of one feature. */
export function featureBit(feature: Feature): number {
  const i = FEATURES.indexOf(feature);
  if (i < 0) throw new RangeError(`unknown feature ${String(feature)}`);
  return 1 << i;
}

/** Every feature this implementation knows. */
export const ALL_CAPABILITIES: Capabilities = (1 << FEATURES.length) - 1;
/**
 * What a peer that declares nothing is taken to understand: every feature from before
 * capabilities were negotiated (bits 1..7: all of that release's but `extensions`), the release
 * every deployed peer runs. Fixed: a feature added since is never assumed of a silent peer.
 */
export const LEGACY_CAPABILITIES: Capabilities = 0xff & ~featureBit('extensions');

export function hasFeature(capabilities: Capabilities, feature: Feature): boolean {
  return (capabilities & featureBit(feature)) !== 0;
}

/** The set the names declare; names this implementation does not know are ignored (a newer peer's). */
export function capabilitiesOf(names: readonly string[]): Capabilities {
  let bits = 0;
  for (const name of names) {
    const i = FEATURES.indexOf(name as Feature);
    if (i >= 0) bits |= 1 << i;
  }
  return bits;
}

/** Every feature but `disabled` (a peer emulating an older release). */
export function withoutFeatures(disabled: readonly Feature[] = []): Capabilities {
  let caps = ALL_CAPABILITIES;
  for (const feature of disabled) caps &= ~featureBit(feature);
  return caps;
}

/** The names of a set, in bit order (what a peer declares in signalling). */
export function featureNames(capabilities: Capabilities): Feature[] {
  return FEATURES.filter((_, i) => (capabilities & (1 << i)) !== 0);
}

/**
 * A comma-separated list of feature names (an option's value, e.g. `resume,ranges`); throws a
 * RangeError naming an unknown one, so a typo in a switch is not a silent no-op.
 */
export function parseFeatureList(text: string): Feature[] {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name.length > 0);
  for (const name of names)
    if (!FEATURES.includes(name as Feature))
      throw new RangeError(`unknown feature "${name}" (known: ${FEATURES.join(', ')})`);
  return names as Feature[];
}

/** Extension entry types (§4.8); a receiver skips types it does not know. */
export const ExtensionType = { Capabilities: 1 } as const;
/** Most bytes of an extension block (its length is one byte). */
export const MAX_EXTENSION_BYTES = 255;
/** Most bitmap bytes read of a capabilities entry: longer ones are a newer peer's, their extra bits ignored. */
const CAPABILITY_BYTES_READ = 4;

/** An extension block holding the capabilities entry (bitmap bytes least significant first). */
export function capabilityExtension(capabilities: Capabilities): Uint8Array {
  const bits = capabilities & ALL_CAPABILITIES;
  const length = Math.max(1, Math.ceil(FEATURES.length / 8));
  const out = new Uint8Array(2 + length);
  out[0] = ExtensionType.Capabilities;
  out[1] = length;
  for (let i = 0; i < length; i++) out[2 + i] = (bits >>> (8 * i)) & 0xff;
  return out;
}

/**
 * The capabilities an extension block declares (features this implementation does not know are
 * dropped), or undefined when it has no capabilities entry. The block was checked by the decoder.
 */
export function extensionCapabilities(block: Uint8Array): Capabilities | undefined {
  for (let at = 0; at + 2 <= block.length; at += 2 + block[at + 1]) {
    if (block[at] !== ExtensionType.Capabilities) continue;
    let bits = 0;
    const length = Math.min(block[at + 1], CAPABILITY_BYTES_READ);
    for (let i = 0; i < length; i++) bits |= block[at + 2 + i] << (8 * i);
    return (bits >>> 0) & ALL_CAPABILITIES;
  }
  return undefined;
}

/** Why bytes are not an extension block: entries (type u8, length u8, value) that tile it exactly. */
function extensionsProblem(block: Uint8Array, what: string): WireError | null {
  let at = 0;
  while (at < block.length) {
    if (at + 2 > block.length || at + 2 + block[at + 1] > block.length)
      return new WireError('out-of-range', `${what}: extension entries do not fill the extension block`);
    at += 2 + block[at + 1];
  }
  return null;
}

function assertExtensions(block: Uint8Array): void {
  assertRange('extension bytes', block.length, 0, MAX_EXTENSION_BYTES);
  const problem = extensionsProblem(block, 'extensions');
  if (problem) throw new RangeError(problem.message);
}

/** Writes `block` and its length byte so they end at `end`. */
function writeExtensions(buf: Uint8Array, end: number, block: Uint8Array): void {
  buf.set(block, end - 1 - block.length);
  buf[end - 1] = block.length;
}

/**
 * Splits the extension block (and its length byte) off the end of `buf`: the block and what
 * precedes it, or an error when the length points before `minStart`.
 */
function takeExtensions(
  buf: Uint8Array,
  minStart: number,
  what: string,
): Result<{ block: Uint8Array; rest: Uint8Array }> {
  if (buf.length < minStart + 1) return err(new WireError('truncated', `${what}: no room for the extension length`));
  const length = buf[buf.length - 1];
  const start = buf.length - 1 - length;
  if (start < minStart)
    return err(new WireError('truncated', `${what}: extension block of ${length} bytes does not fit`));
  const block = buf.subarray(start, buf.length - 1);
  const problem = extensionsProblem(block, what);
  if (problem) return err(problem);
  return ok({ block, rest: buf.subarray(0, start) });
}

// ---------------------------------------------------------------- encoders
// Encoders validate their arguments and throw RangeError: a caller passing a bad value is a bug
// in our own code, not hostile input.

export function encodeRequest(m: Omit<RequestMessage, 'type'>): Uint8Array {
  const url = utf8Encoder.encode(m.url);
  assertRange('url bytes', url.length, 0, MAX_URL_BYTES);
  assertRange('sourceCount', m.sourceCount, 1, MAX_SOURCES);
  assertRange('sourceIndex', m.sourceIndex, 0, m.sourceCount - 1);
  assertRange('window', m.window, 1, MAX_WINDOW);
  assertRange('generationSize', m.generationSize, 1, MAX_GENERATION_SIZE);
  assertRange('symbolSize', m.symbolSize, MIN_SYMBOL_SIZE, MAX_SYMBOL_SIZE);
  if (m.range) {
    const problem = rangeProblem(m.range);
    if (problem) throw new RangeError(problem);
  }
  if (m.weights && m.weights.length !== m.sourceCount)
    throw new RangeError(`${m.weights.length} initial weights for ${m.sourceCount} sources`);
  if (m.resume) {
    assertU32('resume fromUnit', m.resume.fromUnit);
    assertRange('resume blockRound', m.resume.blockRound, 0, MAX_BLOCK_ROUND);
  }
  if (m.extensions) assertExtensions(m.extensions);
  const buf = new Uint8Array(requestLength(m, url.length));
  const v = header(buf, MessageType.Request, m.transferId);
  buf[6] = modeId(m.mode);
  const scheduler = SCHEDULER_IDS[m.scheduler];
  if (scheduler === undefined) throw new RangeError(`unknown scheduler ${String(m.scheduler)}`);
  buf[7] = scheduler | (m.resume ? REQUEST_FLAG_RESUME : 0) | (m.extensions ? REQUEST_FLAG_EXTENSIONS : 0);
  buf[8] = m.sourceIndex;
  buf[9] = m.sourceCount;
  v.setUint16(10, m.window);
  buf[12] = m.generationSize;
  v.setUint16(13, m.symbolSize);
  v.setUint16(15, url.length);
  buf.set(url, 17);
  const at = 17 + url.length;
  if (m.range) {
    setUint48(v, at, m.range.start);
    v.setUint32(at + 6, m.range.length);
  }
  if (m.weights) buf.set(m.weights, at + REQUEST_RANGE_BYTES);
  if (m.extensions) writeExtensions(buf, buf.length - (m.resume ? REQUEST_RESUME_BYTES : 0), m.extensions);
  if (m.resume) {
    v.setUint32(buf.length - REQUEST_RESUME_BYTES, m.resume.fromUnit);
    v.setUint32(buf.length - 4, m.resume.blockRound);
  }
  return buf;
}

/**
 * Bytes of the REQUEST `m` encodes to (`urlBytes`: its URL's UTF-8 length when known), e.g. to
 * leave out a resume part that would not fit in one datagram.
 */
export function requestLength(
  m: Pick<RequestMessage, 'url' | 'range' | 'weights' | 'resume' | 'extensions'>,
  urlBytes = utf8Encoder.encode(m.url).length,
): number {
  // Weights follow a range; a whole-object REQUEST with weights carries the empty range (0, 0).
  const trailer = m.weights ? REQUEST_RANGE_BYTES + m.weights.length : m.range ? REQUEST_RANGE_BYTES : 0;
  const extensions = m.extensions ? m.extensions.length + 1 : 0;
  return HEADER_BYTES + 11 + urlBytes + trailer + extensions + (m.resume ? REQUEST_RESUME_BYTES : 0);
}

export function encodeMeta(m: Omit<MetaMessage, 'type'>): Uint8Array {
  assertRange('objectLength', m.objectLength, 0, MAX_OBJECT_BYTES);
  assertRange('symbolSize', m.symbolSize, MIN_SYMBOL_SIZE, MAX_SYMBOL_SIZE);
  assertRange('generationSize', m.generationSize, 1, MAX_GENERATION_SIZE);
  if (m.digest.length !== DIGEST_BYTES) throw new RangeError('digest must be 32 bytes');
  if (m.unitRoot.length !== DIGEST_BYTES) throw new RangeError('unitRoot must be 32 bytes');
  const signed = m.signed;
  const extensions = m.extensions;
  if (extensions) assertExtensions(extensions);
  // The flags that say a signature or extensions follow sit in the attributes block: it is there
  // (empty) whenever they are.
  const attributes =
    (m.attributes && (m.attributes.range || m.attributes.contentType)) || signed || extensions
      ? (m.attributes ?? {})
      : undefined;
  const type = attributes?.contentType !== undefined ? utf8Encoder.encode(attributes.contentType) : undefined;
  const validator = signed?.validator !== undefined ? utf8Encoder.encode(signed.validator.value) : undefined;
  if (signed) {
    assertRange('fetchedAt', signed.fetchedAt, 0, MAX_RANGE_OFFSET);
    if (signed.signature.length !== SIGNATURE_BYTES) throw new RangeError(`signature must be ${SIGNATURE_BYTES} bytes`);
    if (signed.validator !== undefined && !validValidator(signed.validator.value))
      throw new RangeError(`validator must be 1..${MAX_VALIDATOR_BYTES} visible ASCII characters`);
  }
  if (attributes?.contentType !== undefined && !validContentType(attributes.contentType))
    throw new RangeError(`contentType must be 1..${MAX_CONTENT_TYPE_BYTES} visible ASCII characters`);
  if (attributes?.range) {
    assertRange('range start', attributes.range.start, 0, MAX_RANGE_OFFSET);
    if (attributes.range.completeLength !== undefined)
      assertRange('completeLength', attributes.range.completeLength, 0, MAX_RANGE_OFFSET);
  }
  const signatureBytes = signed ? META_SIGNATURE_FIXED_BYTES + (validator?.length ?? 0) : 0;
  const extensionBytes = extensions ? extensions.length + 1 : 0;
  const buf = new Uint8Array(
    META_BYTES + (attributes ? META_ATTRIBUTES_BYTES + (type?.length ?? 0) : 0) + signatureBytes + extensionBytes,
  );
  const v = header(buf, MessageType.Meta, m.transferId);
  v.setUint32(6, m.objectLength);
  v.setUint16(10, m.symbolSize);
  buf[12] = m.generationSize;
  buf[13] = modeId(m.mode);
  buf.set(m.digest, 14);
  buf.set(m.unitRoot, 14 + DIGEST_BYTES);
  if (attributes) {
    const range = attributes.range;
    const complete = range?.completeLength;
    buf[META_BYTES] =
      (range ? META_FLAG_RANGED : 0) |
      (complete !== undefined ? META_FLAG_COMPLETE_LENGTH : 0) |
      (signed ? META_FLAG_SIGNED : 0) |
      (extensions ? META_FLAG_EXTENSIONS : 0);
    setUint48(v, META_BYTES + 1, range?.start ?? 0);
    setUint48(v, META_BYTES + 7, complete ?? 0);
    buf[META_BYTES + 13] = type?.length ?? 0;
    if (type) buf.set(type, META_BYTES + META_ATTRIBUTES_BYTES);
  }
  const signatureEnd = buf.length - extensionBytes;
  if (signed) {
    const at = signatureEnd - signatureBytes;
    setUint48(v, at, signed.fetchedAt);
    buf[at + 6] = signed.validator ? VALIDATOR_KINDS.indexOf(signed.validator.kind) : 0;
    buf[at + 7] = validator?.length ?? 0;
    if (validator) buf.set(validator, at + 8);
    buf.set(signed.signature, signatureEnd - SIGNATURE_BYTES);
  }
  if (extensions) writeExtensions(buf, buf.length, extensions);
  return buf;
}

export function encodeDigests(m: Omit<DigestsMessage, 'type'>): Uint8Array {
  assertU32('first', m.first);
  if (m.digests.length % UNIT_DIGEST_BYTES !== 0) throw new RangeError('digests must be whole unit digests');
  assertRange('digest count', m.digests.length / UNIT_DIGEST_BYTES, 1, MAX_DIGESTS_PER_MESSAGE);
  const buf = new Uint8Array(DIGESTS_HEADER_BYTES + m.digests.length);
  const v = header(buf, MessageType.Digests, m.transferId);
  v.setUint32(6, m.first);
  v.setUint16(10, m.digests.length / UNIT_DIGEST_BYTES);
  buf.set(m.digests, DIGESTS_HEADER_BYTES);
  return buf;
}

export function encodeSymbolDigests(m: Omit<SymbolDigestsMessage, 'type'>): Uint8Array {
  assertU32('check', m.check);
  assertRange('first', m.first, 0, MAX_GENERATION_SIZE - 1);
  if (m.digests.length % UNIT_DIGEST_BYTES !== 0) throw new RangeError('digests must be whole symbol digests');
  const count = m.digests.length / UNIT_DIGEST_BYTES;
  assertRange('symbol digest count', count, 1, Math.min(MAX_DIGESTS_PER_MESSAGE, MAX_GENERATION_SIZE - m.first));
  const buf = new Uint8Array(SYMBOL_DIGESTS_HEADER_BYTES + m.digests.length);
  const v = header(buf, MessageType.SymbolDigests, m.transferId);
  v.setUint32(6, m.check);
  buf[10] = m.first;
  buf[11] = count;
  buf.set(m.digests, SYMBOL_DIGESTS_HEADER_BYTES);
  return buf;
}

export function encodeSymbolDigestsRequest(m: Omit<SymbolDigestsRequestMessage, 'type'>): Uint8Array {
  assertU32('check', m.check);
  const buf = new Uint8Array(SYMBOL_DIGESTS_REQUEST_BYTES);
  const v = header(buf, MessageType.SymbolDigestsRequest, m.transferId);
  v.setUint32(6, m.check);
  return buf;
}

/** Writes a DATA_UNCODED header into buf[0..14); the caller writes the payload after it. */
export function encodeFetching(m: Omit<FetchingMessage, 'type'>): Uint8Array {
  assertU32('answerWithinMs', m.answerWithinMs);
  if (m.signature && m.signature.length !== SIGNATURE_BYTES)
    throw new RangeError(`signature must be ${SIGNATURE_BYTES} bytes`);
  const buf = new Uint8Array(FETCHING_BYTES + (m.signature ? SIGNATURE_BYTES : 0));
  const v = header(buf, MessageType.Fetching, m.transferId);
  buf[6] = m.signature ? FETCHING_FLAG_SIGNED : 0;
  v.setUint32(7, m.answerWithinMs);
  if (m.signature) buf.set(m.signature, FETCHING_BYTES);
  return buf;
}

export function writeDataUncodedHeader(buf: Uint8Array, transferId: number, seq: number, index: number): void {
  assertRange('payload bytes', buf.length - DATA_UNCODED_HEADER_BYTES, 1, MAX_SYMBOL_SIZE);
  assertU32('seq', seq);
  assertU32('index', index);
  const v = header(buf, MessageType.DataUncoded, transferId);
  v.setUint32(6, seq >>> 0);
  v.setUint32(10, index >>> 0);
}

/** Writes a DATA_RLNC header into buf[0..18); the caller writes the payload after it. */
export function writeDataRlncHeader(
  buf: Uint8Array,
  transferId: number,
  seq: number,
  generation: number,
  seed: number,
): void {
  assertU32('seq', seq);
  assertU32('generation', generation);
  assertU32('seed', seed);
  const v = header(buf, MessageType.DataRlnc, transferId);
  v.setUint32(6, seq >>> 0);
  v.setUint32(10, generation >>> 0);
  v.setUint32(14, seed >>> 0);
}

/** Writes a DATA_FOUNTAIN header into buf[0..18); the caller writes the payload after it. */
export function writeDataFountainHeader(
  buf: Uint8Array,
  transferId: number,
  seq: number,
  block: number,
  blockId: number,
): void {
  assertU32('seq', seq);
  assertU32('block', block);
  assertU32('blockId', blockId);
  const v = header(buf, MessageType.DataFountain, transferId);
  v.setUint32(6, seq >>> 0);
  v.setUint32(10, block >>> 0);
  v.setUint32(14, blockId >>> 0);
}

export function encodeDataUncoded(m: Omit<DataUncodedMessage, 'type'>): Uint8Array {
  assertRange('payload bytes', m.payload.length, 1, MAX_SYMBOL_SIZE);
  const buf = new Uint8Array(DATA_UNCODED_HEADER_BYTES + m.payload.length);
  writeDataUncodedHeader(buf, m.transferId, m.seq, m.index);
  buf.set(m.payload, DATA_UNCODED_HEADER_BYTES);
  return buf;
}

export function encodeDataRlnc(m: Omit<DataRlncMessage, 'type'>): Uint8Array {
  assertRange('payload bytes', m.payload.length, 1, MAX_SYMBOL_SIZE);
  const buf = new Uint8Array(DATA_RLNC_HEADER_BYTES + m.payload.length);
  writeDataRlncHeader(buf, m.transferId, m.seq, m.generation, m.seed);
  buf.set(m.payload, DATA_RLNC_HEADER_BYTES);
  return buf;
}

export function encodeDataFountain(m: Omit<DataFountainMessage, 'type'>): Uint8Array {
  assertRange('payload bytes', m.payload.length, 1, MAX_SYMBOL_SIZE);
  const buf = new Uint8Array(DATA_FOUNTAIN_HEADER_BYTES + m.payload.length);
  writeDataFountainHeader(buf, m.transferId, m.seq, m.block, m.blockId);
  buf.set(m.payload, DATA_FOUNTAIN_HEADER_BYTES);
  return buf;
}

const FEEDBACK_FIXED_BYTES = HEADER_BYTES + 20; // flags..sourceCount
function encodeFeedbackCommon(buf: Uint8Array, type: number, m: FeedbackCommon, count: number): number {
  const v = header(buf, type, m.transferId);
  buf[6] = (m.metaKnown ? 1 : 0) | (m.complete ? 2 : 0) | (m.rewind ? 4 : 0);
  v.setUint32(7, m.largestSeq >>> 0);
  v.setUint16(11, Math.min(0xffff, Math.max(0, Math.round(m.ackDelay))));
  v.setUint32(13, m.ackBits >>> 0);
  v.setUint32(17, Math.min(0xffffffff, Math.max(0, Math.round(m.rateBps))));
  v.setUint32(21, m.inFlightCap >>> 0);
  buf[25] = m.weights.length;
  buf.set(m.weights, 26);
  let o = 26 + m.weights.length;
  v.setUint32(o, m.wMin >>> 0);
  v.setUint16(o + 4, count);
  o += 6;
  return o;
}

function checkFeedbackCommon(m: FeedbackCommon, count: number, maxCount: number): void {
  assertRange('weights', m.weights.length, 1, MAX_SOURCES);
  assertRange('unit count', count, 0, maxCount);
  assertU32('largestSeq', m.largestSeq);
  assertU32('ackBits', m.ackBits);
  assertU32('inFlightCap', m.inFlightCap);
  assertU32('wMin', m.wMin);
}

export function encodeFeedbackUncoded(m: Omit<FeedbackUncodedMessage, 'type'>): Uint8Array {
  checkFeedbackCommon(m, m.bitCount, MAX_WINDOW);
  const bitmapBytes = (m.bitCount + 7) >> 3;
  if (m.bitmap.length < bitmapBytes) throw new RangeError('bitmap shorter than bitCount');
  const buf = new Uint8Array(FEEDBACK_FIXED_BYTES + m.weights.length + 6 + bitmapBytes);
  const o = encodeFeedbackCommon(buf, MessageType.FeedbackUncoded, m, m.bitCount);
  buf.set(m.bitmap.subarray(0, bitmapBytes), o);
  // Bits past bitCount in the last byte must be zero (canonical encoding).
  if (m.bitCount & 7) buf[o + bitmapBytes - 1] &= (1 << (m.bitCount & 7)) - 1;
  return buf;
}

export function encodeFeedbackRlnc(m: Omit<FeedbackRlncMessage, 'type'>): Uint8Array {
  checkFeedbackCommon(m, m.ranks.length, MAX_FEEDBACK_GENERATIONS);
  const buf = new Uint8Array(FEEDBACK_FIXED_BYTES + m.weights.length + 6 + m.ranks.length);
  const o = encodeFeedbackCommon(buf, MessageType.FeedbackRlnc, m, m.ranks.length);
  buf.set(m.ranks, o);
  return buf;
}

export function encodeFeedbackFountain(m: Omit<FeedbackFountainMessage, 'type'>): Uint8Array {
  checkFeedbackCommon(m, m.missing.length, MAX_FEEDBACK_BLOCKS);
  const buf = new Uint8Array(FEEDBACK_FIXED_BYTES + m.weights.length + 6 + 2 * m.missing.length);
  const o = encodeFeedbackCommon(buf, MessageType.FeedbackFountain, m, m.missing.length);
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let i = 0; i < m.missing.length; i++) v.setUint16(o + 2 * i, m.missing[i]);
  return buf;
}

export function encodeStop(m: Omit<StopMessage, 'type'>): Uint8Array {
  assertRange('stop reason', m.reason, 0, StopReason.BadSource);
  const buf = new Uint8Array(HEADER_BYTES + 1);
  header(buf, MessageType.Stop, m.transferId);
  buf[6] = m.reason;
  return buf;
}

export function encodeError(m: Omit<ErrorMessage, 'type'>): Uint8Array {
  let text = utf8Encoder.encode(m.message);
  if (text.length > MAX_ERROR_MESSAGE_BYTES) {
    // Truncate on a character boundary so the receiver's strict UTF-8 check still passes.
    let end = MAX_ERROR_MESSAGE_BYTES;
    while (end > 0 && (text[end] & 0xc0) === 0x80) end--;
    text = text.subarray(0, end);
  }
  assertRange('code', m.code, 0, 0xffff);
  const buf = new Uint8Array(HEADER_BYTES + 4 + text.length);
  const v = header(buf, MessageType.Error, m.transferId);
  v.setUint16(6, m.code);
  v.setUint16(8, text.length);
  buf.set(text, 10);
  return buf;
}

export function encode(m: Message): Uint8Array {
  switch (m.type) {
    case MessageType.Request:
      return encodeRequest(m);
    case MessageType.Meta:
      return encodeMeta(m);
    case MessageType.Digests:
      return encodeDigests(m);
    case MessageType.SymbolDigests:
      return encodeSymbolDigests(m);
    case MessageType.SymbolDigestsRequest:
      return encodeSymbolDigestsRequest(m);
    case MessageType.Fetching:
      return encodeFetching(m);
    case MessageType.DataUncoded:
      return encodeDataUncoded(m);
    case MessageType.DataRlnc:
      return encodeDataRlnc(m);
    case MessageType.DataFountain:
      return encodeDataFountain(m);
    case MessageType.FeedbackUncoded:
      return encodeFeedbackUncoded(m);
    case MessageType.FeedbackRlnc:
      return encodeFeedbackRlnc(m);
    case MessageType.FeedbackFountain:
      return encodeFeedbackFountain(m);
    case MessageType.Stop:
      return encodeStop(m);
    case MessageType.Error:
      return encodeError(m);
  }
}

// ---------------------------------------------------------------- decoder

const fail = (code: WireError['code'], message: string) => err(new WireError(code, message));

function need(buf: Uint8Array, bytes: number, what: string): WireError | null {
  return buf.length < bytes ? new WireError('truncated', `${what}: need ${bytes} bytes, have ${buf.length}`) : null;
}

function exact(buf: Uint8Array, bytes: number, what: string): WireError | null {
  if (buf.length < bytes) return new WireError('truncated', `${what}: need ${bytes} bytes, have ${buf.length}`);
  if (buf.length > bytes)
    return new WireError('trailing-bytes', `${what}: ${buf.length - bytes} bytes after the message`);
  return null;
}

function checkRange(name: string, value: number, min: number, max: number): WireError | null {
  return value < min || value > max ? new WireError('out-of-range', `${name} ${value} not in [${min}, ${max}]`) : null;
}

/** Decodes one datagram. Never throws; the payload fields are views into `buf`. */
export function decode(buf: Uint8Array): Result<Message> {
  if (!(buf instanceof Uint8Array)) return fail('truncated', 'not a byte array');
  if (buf.length > MAX_DATAGRAM_BYTES)
    return fail('too-large', `datagram of ${buf.length} bytes exceeds ${MAX_DATAGRAM_BYTES}`);
  const short = need(buf, HEADER_BYTES, 'header');
  if (short) return err(short);
  if (buf[0] !== PROTOCOL_VERSION) return fail('unknown-version', `version ${buf[0]}, expected ${PROTOCOL_VERSION}`);
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const transferId = v.getUint32(2);
  switch (buf[1]) {
    case MessageType.Request:
      return decodeRequest(buf, v, transferId);
    case MessageType.Meta:
      return decodeMeta(buf, v, transferId);
    case MessageType.Digests:
      return decodeDigests(buf, v, transferId);
    case MessageType.SymbolDigests:
      return decodeSymbolDigests(buf, v, transferId);
    case MessageType.SymbolDigestsRequest:
      return decodeSymbolDigestsRequest(buf, v, transferId);
    case MessageType.Fetching:
      return decodeFetching(buf, v, transferId);
    case MessageType.DataUncoded:
      return decodeDataUncoded(buf, v, transferId);
    case MessageType.DataRlnc:
      return decodeDataRlnc(buf, v, transferId);
    case MessageType.DataFountain:
      return decodeDataFountain(buf, v, transferId);
    case MessageType.FeedbackUncoded:
    case MessageType.FeedbackRlnc:
    case MessageType.FeedbackFountain:
      return decodeFeedback(buf, v, transferId);
    case MessageType.Stop:
      return decodeStop(buf, transferId);
    case MessageType.Error:
      return decodeErrorMessage(buf, v, transferId);
    default:
      return fail('unknown-type', `message type 0x${buf[1].toString(16).padStart(2, '0')}`);
  }
}

function decodeRequest(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, 17, 'REQUEST');
  if (short) return err(short);
  const mode = MODES_BY_ID[buf[6]];
  if (mode === undefined) return fail('out-of-range', `mode ${buf[6]}`);
  const scheduler = SCHEDULERS_BY_ID[buf[7] & REQUEST_SCHEDULER_MASK];
  if (scheduler === undefined) return fail('out-of-range', `scheduler ${buf[7]}`);
  let resume: RequestResume | undefined;
  if (buf[7] & REQUEST_FLAG_RESUME) {
    const short = need(buf, 17 + REQUEST_RESUME_BYTES, 'REQUEST');
    if (short) return err(short);
    const end = buf.length - REQUEST_RESUME_BYTES;
    resume = { fromUnit: v.getUint32(end), blockRound: v.getUint32(end + 4) };
    const bad = checkRange('resume blockRound', resume.blockRound, 0, MAX_BLOCK_ROUND);
    if (bad) return err(bad);
    buf = buf.subarray(0, end);
  }
  let extensions: Uint8Array | undefined;
  if (buf[7] & REQUEST_FLAG_EXTENSIONS) {
    const taken = takeExtensions(buf, 17, 'REQUEST');
    if (!taken.ok) return err(taken.error);
    extensions = taken.value.block;
    buf = taken.value.rest;
  }
  const sourceIndex = buf[8];
  const sourceCount = buf[9];
  const window = v.getUint16(10);
  const generationSize = buf[12];
  const symbolSize = v.getUint16(13);
  const urlLength = v.getUint16(15);
  const bad =
    checkRange('sourceCount', sourceCount, 1, MAX_SOURCES) ??
    checkRange('sourceIndex', sourceIndex, 0, sourceCount - 1) ??
    checkRange('window', window, 1, MAX_WINDOW) ??
    checkRange('generationSize', generationSize, 1, MAX_GENERATION_SIZE) ??
    checkRange('symbolSize', symbolSize, MIN_SYMBOL_SIZE, MAX_SYMBOL_SIZE) ??
    checkRange('url length', urlLength, 0, MAX_URL_BYTES) ??
    requestTrailerProblem(buf, 17 + urlLength, sourceCount);
  if (bad) return err(bad);
  const at = 17 + urlLength;
  let range: ByteRange | undefined;
  if (buf.length > at) {
    range = { start: getUint48(v, at), length: v.getUint32(at + 6) };
    const withWeights = buf.length > at + REQUEST_RANGE_BYTES;
    if (withWeights && range.start === 0 && range.length === 0) range = undefined;
    const problem = range && rangeProblem(range);
    if (problem) return fail('out-of-range', problem);
  }
  const weights = buf.length > at + REQUEST_RANGE_BYTES ? buf.subarray(at + REQUEST_RANGE_BYTES) : undefined;
  let url: string;
  try {
    url = utf8Decoder.decode(buf.subarray(17, 17 + urlLength));
  } catch {
    return fail('out-of-range', 'url is not valid UTF-8');
  }
  return ok({
    type: MessageType.Request,
    transferId,
    mode,
    scheduler,
    sourceIndex,
    sourceCount,
    window,
    generationSize,
    symbolSize,
    url,
    ...(range ? { range } : {}),
    ...(weights ? { weights } : {}),
    ...(resume ? { resume } : {}),
    ...(extensions ? { extensions } : {}),
  });
}

/** After the URL: nothing, a range, or a range (possibly the empty (0, 0)) and one weight per source. */
function requestTrailerProblem(buf: Uint8Array, at: number, sourceCount: number): WireError | null {
  const rest = buf.length - at;
  if (rest === 0 || rest === REQUEST_RANGE_BYTES || rest === REQUEST_RANGE_BYTES + sourceCount) return null;
  return (
    need(buf, at, 'REQUEST') ??
    new WireError('trailing-bytes', `REQUEST: ${rest} bytes after the URL (0, 10 or ${10 + sourceCount} allowed)`)
  );
}

function decodeMeta(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short =
    buf.length > META_BYTES ? need(buf, META_BYTES + META_ATTRIBUTES_BYTES, 'META') : exact(buf, META_BYTES, 'META');
  if (short) return err(short);
  const objectLength = v.getUint32(6);
  const symbolSize = v.getUint16(10);
  const generationSize = buf[12];
  const mode = MODES_BY_ID[buf[13]];
  const bad =
    checkRange('objectLength', objectLength, 0, MAX_OBJECT_BYTES) ??
    checkRange('symbolSize', symbolSize, MIN_SYMBOL_SIZE, MAX_SYMBOL_SIZE) ??
    checkRange('generationSize', generationSize, 1, MAX_GENERATION_SIZE);
  if (bad) return err(bad);
  if (mode === undefined) return fail('out-of-range', `mode ${buf[13]}`);
  let attributes: ObjectAttributes | undefined;
  let signed: MetaSignature | undefined;
  let extensions: Uint8Array | undefined;
  if (buf.length > META_BYTES) {
    if (buf[META_BYTES] & META_FLAG_EXTENSIONS) {
      const taken = takeExtensions(buf, META_BYTES + META_ATTRIBUTES_BYTES, 'META');
      if (!taken.ok) return err(taken.error);
      extensions = taken.value.block;
      buf = taken.value.rest;
    }
    const decoded = decodeMetaAttributes(buf, v);
    if (!decoded.ok) return decoded;
    signed = decoded.value.signed;
    const a = decoded.value.attributes;
    // A signed META (or one with extensions) carries the attributes block for its flags alone:
    // empty attributes are none.
    attributes = (signed || extensions) && !a.range && a.contentType === undefined ? undefined : a;
  }
  return ok({
    type: MessageType.Meta,
    transferId,
    objectLength,
    symbolSize,
    generationSize,
    mode,
    digest: buf.subarray(14, 14 + DIGEST_BYTES),
    unitRoot: buf.subarray(14 + DIGEST_BYTES, 14 + 2 * DIGEST_BYTES),
    ...(attributes ? { attributes } : {}),
    ...(signed ? { signed } : {}),
    ...(extensions ? { extensions } : {}),
  });
}

/** META's optional part (after the fixed 78 bytes); the caller checked it has its fixed 14 bytes. */
function decodeMetaAttributes(
  buf: Uint8Array,
  v: DataView,
): Result<{ attributes: ObjectAttributes; signed?: MetaSignature }> {
  const flags = buf[META_BYTES];
  const start = getUint48(v, META_BYTES + 1);
  const complete = getUint48(v, META_BYTES + 7);
  const typeLength = buf[META_BYTES + 13];
  const ranged = (flags & META_FLAG_RANGED) !== 0;
  const isSigned = (flags & META_FLAG_SIGNED) !== 0;
  const typeEnd = META_BYTES + META_ATTRIBUTES_BYTES + typeLength;
  const signature = isSigned ? need(buf, typeEnd + META_SIGNATURE_FIXED_BYTES, 'META') : null;
  if (signature) return err(signature);
  const validatorKind = isSigned ? buf[typeEnd + 6] : 0;
  const validatorLength = isSigned ? buf[typeEnd + 7] : 0;
  const bad =
    (flags & ~(META_FLAG_RANGED | META_FLAG_COMPLETE_LENGTH | META_FLAG_SIGNED | META_FLAG_EXTENSIONS)
      ? new WireError('out-of-range', `reserved META flags 0x${flags.toString(16)}`)
      : null) ??
    (!ranged && flags & META_FLAG_COMPLETE_LENGTH
      ? new WireError('out-of-range', 'a complete length without a range')
      : null) ??
    (!ranged && start !== 0 ? new WireError('out-of-range', 'a range start without a range') : null) ??
    checkRange('range start', start, 0, MAX_RANGE_OFFSET) ??
    checkRange('completeLength', complete, 0, MAX_RANGE_OFFSET) ??
    checkRange('contentType length', typeLength, 0, MAX_CONTENT_TYPE_BYTES) ??
    checkRange('validator kind', validatorKind, 0, VALIDATOR_KINDS.length - 1) ??
    checkRange(
      'validator length',
      validatorLength,
      validatorKind === 0 ? 0 : 1,
      validatorKind === 0 ? 0 : MAX_VALIDATOR_BYTES,
    ) ??
    exact(buf, typeEnd + (isSigned ? META_SIGNATURE_FIXED_BYTES + validatorLength : 0), 'META');
  if (bad) return err(bad);
  const attributes: ObjectAttributes = {};
  if (typeLength > 0) {
    const type = String.fromCharCode(...buf.subarray(META_BYTES + META_ATTRIBUTES_BYTES, typeEnd));
    if (!validContentType(type)) return fail('out-of-range', 'contentType is not visible ASCII');
    attributes.contentType = type;
  }
  if (ranged) attributes.range = flags & META_FLAG_COMPLETE_LENGTH ? { start, completeLength: complete } : { start };
  if (!isSigned) return ok({ attributes });
  const signed: MetaSignature = {
    fetchedAt: getUint48(v, typeEnd),
    signature: buf.subarray(buf.length - SIGNATURE_BYTES),
  };
  const kind = VALIDATOR_KINDS[validatorKind];
  if (kind) {
    const value = String.fromCharCode(...buf.subarray(typeEnd + 8, typeEnd + 8 + validatorLength));
    if (!validValidator(value)) return fail('out-of-range', 'validator is not visible ASCII');
    signed.validator = { kind, value };
  }
  return ok({ attributes, signed });
}

function decodeDigests(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, DIGESTS_HEADER_BYTES, 'DIGESTS');
  if (short) return err(short);
  const first = v.getUint32(6);
  const count = v.getUint16(10);
  const bad =
    checkRange('digest count', count, 1, MAX_DIGESTS_PER_MESSAGE) ??
    exact(buf, DIGESTS_HEADER_BYTES + count * UNIT_DIGEST_BYTES, 'DIGESTS');
  if (bad) return err(bad);
  return ok({ type: MessageType.Digests, transferId, first, digests: buf.subarray(DIGESTS_HEADER_BYTES) });
}

function decodeSymbolDigests(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, SYMBOL_DIGESTS_HEADER_BYTES, 'SYMBOL_DIGESTS');
  if (short) return err(short);
  const check = v.getUint32(6);
  const first = buf[10];
  const count = buf[11];
  const bad =
    checkRange('first', first, 0, MAX_GENERATION_SIZE - 1) ??
    checkRange('symbol digest count', count, 1, Math.min(MAX_DIGESTS_PER_MESSAGE, MAX_GENERATION_SIZE - first)) ??
    exact(buf, SYMBOL_DIGESTS_HEADER_BYTES + count * UNIT_DIGEST_BYTES, 'SYMBOL_DIGESTS');
  if (bad) return err(bad);
  return ok({
    type: MessageType.SymbolDigests,
    transferId,
    check,
    first,
    digests: buf.subarray(SYMBOL_DIGESTS_HEADER_BYTES),
  });
}

function decodeSymbolDigestsRequest(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const bad = exact(buf, SYMBOL_DIGESTS_REQUEST_BYTES, 'SYMBOL_DIGESTS_REQUEST');
  if (bad) return err(bad);
  return ok({ type: MessageType.SymbolDigestsRequest, transferId, check: v.getUint32(6) });
}

function decodeFetching(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, FETCHING_BYTES, 'FETCHING');
  if (short) return err(short);
  const flags = buf[6];
  if (flags & ~FETCHING_FLAG_SIGNED) return fail('out-of-range', `FETCHING flags 0x${flags.toString(16)}`);
  const signed = (flags & FETCHING_FLAG_SIGNED) !== 0;
  const bad = exact(buf, FETCHING_BYTES + (signed ? SIGNATURE_BYTES : 0), 'FETCHING');
  if (bad) return err(bad);
  return ok({
    type: MessageType.Fetching,
    transferId,
    answerWithinMs: v.getUint32(7),
    ...(signed ? { signature: buf.subarray(FETCHING_BYTES) } : {}),
  });
}

function decodeDataUncoded(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, DATA_UNCODED_HEADER_BYTES + 1, 'DATA_UNCODED');
  if (short) return err(short);
  const bad = checkRange('payload length', buf.length - DATA_UNCODED_HEADER_BYTES, 1, MAX_SYMBOL_SIZE);
  if (bad) return err(bad);
  return ok({
    type: MessageType.DataUncoded,
    transferId,
    seq: v.getUint32(6),
    index: v.getUint32(10),
    payload: buf.subarray(DATA_UNCODED_HEADER_BYTES),
  });
}

function decodeDataRlnc(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, DATA_RLNC_HEADER_BYTES + 1, 'DATA_RLNC');
  if (short) return err(short);
  return ok({
    type: MessageType.DataRlnc,
    transferId,
    seq: v.getUint32(6),
    generation: v.getUint32(10),
    seed: v.getUint32(14),
    payload: buf.subarray(DATA_RLNC_HEADER_BYTES),
  });
}

function decodeDataFountain(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, DATA_FOUNTAIN_HEADER_BYTES + 1, 'DATA_FOUNTAIN');
  if (short) return err(short);
  return ok({
    type: MessageType.DataFountain,
    transferId,
    seq: v.getUint32(6),
    block: v.getUint32(10),
    blockId: v.getUint32(14),
    payload: buf.subarray(DATA_FOUNTAIN_HEADER_BYTES),
  });
}

const MAX_FEEDBACK_UNITS: Record<number, number> = {
  [MessageType.FeedbackUncoded]: MAX_WINDOW,
  [MessageType.FeedbackRlnc]: MAX_FEEDBACK_GENERATIONS,
  [MessageType.FeedbackFountain]: MAX_FEEDBACK_BLOCKS,
};

function decodeFeedback(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, FEEDBACK_FIXED_BYTES, 'FEEDBACK');
  if (short) return err(short);
  const flags = buf[6];
  if (flags & ~7) return fail('out-of-range', `feedback flags 0x${flags.toString(16)}`);
  const sourceCount = buf[25];
  const badCount = checkRange('feedback sourceCount', sourceCount, 1, MAX_SOURCES);
  if (badCount) return err(badCount);
  let o = 26 + sourceCount;
  const shortUnits = need(buf, o + 6, 'FEEDBACK');
  if (shortUnits) return err(shortUnits);
  const weights = buf.subarray(26, 26 + sourceCount);
  const wMin = v.getUint32(o);
  const count = v.getUint16(o + 4);
  o += 6;
  const badUnits = checkRange('feedback unit count', count, 0, MAX_FEEDBACK_UNITS[buf[1]]);
  if (badUnits) return err(badUnits);
  const common: FeedbackCommon = {
    transferId,
    metaKnown: (flags & 1) !== 0,
    complete: (flags & 2) !== 0,
    rewind: (flags & 4) !== 0,
    largestSeq: v.getUint32(7),
    ackDelay: v.getUint16(11),
    ackBits: v.getUint32(13),
    rateBps: v.getUint32(17),
    inFlightCap: v.getUint32(21),
    weights,
    wMin,
  };
  if (buf[1] === MessageType.FeedbackUncoded) {
    const bytes = (count + 7) >> 3;
    const bad = exact(buf, o + bytes, 'FEEDBACK_UNCODED');
    if (bad) return err(bad);
    const bitmap = buf.subarray(o, o + bytes);
    if (count & 7 && bitmap[bytes - 1] >> (count & 7)) return fail('out-of-range', 'bitmap bits set past bitCount');
    return ok({ type: MessageType.FeedbackUncoded, ...common, bitmap, bitCount: count });
  }
  if (buf[1] === MessageType.FeedbackFountain) {
    const bad = exact(buf, o + 2 * count, 'FEEDBACK_FOUNTAIN');
    if (bad) return err(bad);
    // Bounded by the datagram size checked above, so this allocation is at most MAX_FEEDBACK_BLOCKS.
    const missing = new Uint16Array(count);
    for (let i = 0; i < count; i++) missing[i] = v.getUint16(o + 2 * i);
    return ok({ type: MessageType.FeedbackFountain, ...common, missing });
  }
  const bad = exact(buf, o + count, 'FEEDBACK_RLNC');
  if (bad) return err(bad);
  return ok({ type: MessageType.FeedbackRlnc, ...common, ranks: buf.subarray(o, o + count) });
}

function decodeStop(buf: Uint8Array, transferId: number): Result<Message> {
  const short = exact(buf, HEADER_BYTES + 1, 'STOP');
  if (short) return err(short);
  const reason = buf[6];
  if (reason > StopReason.BadSource) return fail('out-of-range', `stop reason ${reason}`);
  return ok({ type: MessageType.Stop, transferId, reason: reason as StopReasonCode });
}

function decodeErrorMessage(buf: Uint8Array, v: DataView, transferId: number): Result<Message> {
  const short = need(buf, HEADER_BYTES + 4, 'ERROR');
  if (short) return err(short);
  const code = v.getUint16(6);
  const length = v.getUint16(8);
  const bad =
    checkRange('error message length', length, 0, MAX_ERROR_MESSAGE_BYTES) ?? exact(buf, 10 + length, 'ERROR');
  if (bad) return err(bad);
  let message: string;
  try {
    message = utf8Decoder.decode(buf.subarray(10, 10 + length));
  } catch {
    return fail('out-of-range', 'error message is not valid UTF-8');
  }
  return ok({ type: MessageType.Error, transferId, code, message });
}
