/** Protocol constants and hard limits. Every decoder checks these before trusting a field. */

export const PROTOCOL_VERSION = 1;

/**
 * Largest datagram we ever emit or accept. libdatachannel fits a message of up to MTU - 124 bytes
 * in one SCTP packet: 1156 at the default MTU 1280, 1276 with `mtu: 1400` configured.
 */
export const MAX_DATAGRAM_BYTES = 1276;
/** Default symbol (payload) size: a data datagram of 1120 + 18 bytes fits unsplit at the default 1280 MTU. */
export const DEFAULT_SYMBOL_SIZE = 1120;
export const MIN_SYMBOL_SIZE = 16;
/** Largest symbol: a DATA_RLNC datagram (18-byte header) of MAX_DATAGRAM_BYTES. */
export const MAX_SYMBOL_SIZE = MAX_DATAGRAM_BYTES - 18;

/** Largest object one transfer may carry (the receiver allocates at most this much). */
export const MAX_OBJECT_BYTES = 1 << 30;
/** Strict moving window, in packets (uncoded) or coded slots (rlnc: window / g generations). */
export const MAX_WINDOW = 8192;
export const MAX_GENERATION_SIZE = 255;
/** Sources one client may use for one transfer (the feedback carries one weight per source). */
export const MAX_SOURCES = 32;
/** A REQUEST (17-byte fixed part) must fit one datagram. */
export const MAX_URL_BYTES = MAX_DATAGRAM_BYTES - 17;
/** Generations one FEEDBACK_RLNC reports (keeps it within one datagram). */
export const MAX_FEEDBACK_GENERATIONS = 1024;
/**
 * Fountain mode cuts the object into source blocks of this many symbols (18 MiB at 1120-byte
 * symbols, so a video segment is one block); each block is one fountain code (wirehair: 2..64000).
 */
export const FOUNTAIN_BLOCK_SYMBOLS = 16384;
/** Source blocks one FEEDBACK_FOUNTAIN reports (2 bytes each, so it fits one datagram). */
export const MAX_FEEDBACK_BLOCKS = 512;
export const MAX_ERROR_MESSAGE_BYTES = 512;
export const DIGEST_BYTES = 32;
/** A check unit's digest: SHA-256 of its bytes truncated to 16 bytes (see docs/protocol.md). */
export const UNIT_DIGEST_BYTES = 16;

/** In-flight cap meaning "no limit" (the receiver has not started to cap this source). */
export const UNLIMITED_IN_FLIGHT = 0xffffffff;
