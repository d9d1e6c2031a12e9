/**
 * Signalling between origo, proxies and clients: JSON text messages over WebSocket, one message
 * per frame, every field validated (zod) on receipt. Paths: `/v1/proxy` for proxies,
 * `/v1/client` for clients. Documented in docs/signalling.md.
 *
 * Flow: a proxy registers with its key and beats; a client says hello (getting a signed token),
 * asks for N proxies, then opens one RTCPeerConnection per proxy with its offer relayed by origo
 * (the proxy answers), ICE candidates trickle both ways through origo, and the client reports a
 * record per download.
 */
import { z } from 'zod';
import { MAX_GENERATION_SIZE, MAX_SYMBOL_SIZE, MIN_SYMBOL_SIZE } from './limits';
import { rangeProblem } from './range';
import ipaddr from 'ipaddr.js';

export const SIGNALLING_VERSION = 1;
/** Largest signalling frame either side accepts (an SDP offer is a few KB). */
export const MAX_SIGNAL_BYTES = 64 * 1024;

const id = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_.:-]+$/);
const mode = z.enum(['uncoded', 'rlnc', 'fountain']);
const downloadMode = z.enum(['http', 'uncoded', 'rlnc', 'fountain']);
const count = z.number().int().min(0).max(1_000_000);
const rate = z.number().finite().min(0).max(1e12);
/** A compact JWS (origo's signed client token); opaque to clients. */
const token = z
  .string()
  .min(1)
  .max(2048)
  .regex(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
/**
 * The audience of a client token for one proxy only. A client presents that token, never its
 * session token, to a proxy (QUIC admission, the Parallel HTTP endpoint): the session token is
 * also what the client's next `hello` keeps its identity with, and a proxy holding it could
 * replace the client's session at origo. Origo's `hello` refuses per-proxy tokens; a proxy
 * refuses the per-proxy tokens of every other proxy.
 */
export const proxyTokenAudience = (proxyId: string): string => `mutp-proxy:${proxyId}`;

/** The client token claim naming the network origo saw the client in (`addressPrefix`). */
export const NETWORK_CLAIM = 'net';

/** An Ed25519 public key as a JWK (RFC 8037): what proxies verify client tokens with. */
export const tokenPublicKey = z.object({
  kty: z.literal('OKP'),
  crv: z.literal('Ed25519'),
  x: z.string().min(1).max(64),
  kid: z.string().max(128).optional(),
  alg: z.literal('EdDSA').optional(),
});

/** An object a staging hint names: an http(s) URL, and optionally the bytes of it (as a REQUEST's range). */
const stageUrl = z
  .string()
  .min(1)
  .max(4096)
  .regex(/^https?:\/\//i, { message: 'a staging hint names an http(s) URL' });
const stageRange = z
  .object({ start: z.number().int(), length: z.number().int() })
  .refine((r) => rangeProblem(r) === undefined, { message: 'not a byte range a REQUEST may name' });
/**
 * The layout the client will REQUEST a staged object with (a REQUEST's mode, symbol and generation
 * size): the proxy prepares the object's encoder for it, so the first packets do not wait for it.
 */
const stageLayout = z.object({
  mode,
  symbolSize: z.number().int().min(MIN_SYMBOL_SIZE).max(MAX_SYMBOL_SIZE),
  generationSize: z.number().int().min(1).max(MAX_GENERATION_SIZE),
});
export type StageLayout = z.infer<typeof stageLayout>;
/**
 * How a proxy's staging of one hint ended (docs/signalling.md, "Staging hints"): `originMs` is
 * what its origin fetch took (0: already cached), `error` a short code when it failed.
 */
const stageOutcome = {
  status: z.enum(['staged', 'failed']),
  originMs: z.number().finite().min(0).max(3_600_000),
  cached: z.boolean(),
  bytes: z
    .number()
    .int()
    .min(0)
    .max(2 ** 48),
  error: z.string().max(64).optional(),
  /**
   * With a hint that named a layout: whether the proxy prepared the object's encoder for it (false:
   * a layout it would refuse in a REQUEST, or no budget for it; the object is staged all the same).
   * Absent without a layout, and from proxies that do not prepare.
   */
  prepared: z.boolean().optional(),
};
/** Most proxies one hint may name: a client stages at the proxies it downloads from. */
export const MAX_STAGE_PROXIES = 8;

/** Statements one `conflict` carries at most (one per source of the download, the first four). */
export const MAX_CONFLICT_STATEMENTS = 4;
/** A proxy's signed META as a client hands it on: the datagram, base64 (at most 419 bytes). */
const signedStatement = z.object({
  proxyId: id,
  meta: z
    .string()
    .max(600)
    .regex(/^[A-Za-z0-9+/]+={0,2}$/),
});

export const sessionDescription = z.object({
  type: z.enum(['offer', 'answer']),
  sdp: z
    .string()
    .min(1)
    .max(32 * 1024),
});
export const iceCandidate = z.object({
  candidate: z.string().max(1024),
  mid: z.string().max(64),
});

/** SHA-256 of a certificate's DER, base64 (standard, padded): a WebTransport `serverCertificateHashes` value. */
const certificateHash = z
  .string()
  .length(44)
  .regex(/^[A-Za-z0-9+/]{43}=$/);
/**
 * A proxy's QUIC endpoint (WebTransport over HTTP/3, MUTP messages as QUIC datagrams): its URL,
 * and the hashes of the certificates it presents, current first, then the next one when a
 * rotation is near. Clients authenticate the proxy by these hashes, as by the DTLS fingerprint in
 * the SDP on WebRTC (docs/signalling.md, "QUIC endpoint"). No hashes: the proxy has a CA-issued
 * certificate, which clients validate the WebPKI way (a chain to a trusted root naming the URL's host).
 */
export const quicEndpoint = z.object({
  url: z
    .url()
    .max(512)
    .regex(/^https:\/\//, { message: 'a QUIC endpoint is an https URL' }),
  certificateHashes: z.array(certificateHash).min(1).max(2).optional(),
});
export type QuicEndpoint = z.infer<typeof quicEndpoint>;

/** An Ed25519 public key, 32 raw bytes as base64url (JWK `x`): what a proxy signs its METAs with. */
export const assertionKey = z.string().regex(/^[A-Za-z0-9_-]{43}$/, { message: 'an Ed25519 public key, base64url' });

/**
 * The optional MUTP features a peer understands, by name (docs/protocol.md §13, `FEATURES` in
 * wire.ts). Names a peer does not know are a newer peer's: accepted and ignored, so adding a
 * feature never breaks an older origo, proxy or client.
 */
export const capabilityNames = z
  .array(
    z
      .string()
      .min(1)
      .max(32)
      .regex(/^[a-z0-9-]+$/),
  )
  .max(32);

/** A `signal` message carries the SDP or one ICE candidate of one client–proxy connection. */
const signalFields = {
  type: z.literal('signal'),
  connectionId: id,
  description: sessionDescription.optional(),
  candidate: iceCandidate.optional(),
};
const exactlyOne = [
  (m: { description?: unknown; candidate?: unknown }) => (m.description === undefined) !== (m.candidate === undefined),
  { message: 'a signal carries exactly one of description and candidate' },
] as const;

/** A client's network as origo names it (`addressPrefix`, e.g. 203.0.113.0/24). */
const clientNetwork = z.string().min(1).max(64);

/**
 * Locality (issue 34, docs/signalling.md "Selection policy"): a region is an operator's label for
 * where proxies sit (`eu-west`, `isp-a`); origo compares names only, it checks no geography.
 */
export const regionName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, { message: 'a region name: letters, digits, . _ -, at most 63' });
/** Client address prefixes (CIDR) one proxy may declare its region serves. */
export const MAX_REGION_PREFIXES = 16;
/** A client address prefix, IPv4 or IPv6 CIDR (`203.0.113.0/24`, `2001:db8::/32`). */
export const regionPrefix = z.string().max(64).refine(isCidr, { message: 'a CIDR prefix, e.g. 203.0.113.0/24' });

function isCidr(s: string): boolean {
  try {
    ipaddr.parseCIDR(s);
    return true;
  } catch {
    return false;
  }
}

// ------------------------------------------------------------------ proxy <-> origo

export const proxyToOrigo = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('register'),
    version: z.literal(SIGNALLING_VERSION),
    secret: z.string().min(1).max(256),
    /** Stable identity across reconnects; origo assigns one when absent. */
    proxyId: id.optional(),
    name: z.string().min(1).max(128),
    /** Base URL of the proxy's HTTP endpoint (Parallel HTTP baseline, health). */
    httpUrl: z.url().max(512),
    /** Upload capacity in bytes/s (the configured limit; 0 = unknown). */
    capacityBps: rate,
    maxTransfers: z.number().int().min(1).max(100_000),
    modes: z.array(mode).min(1).max(3),
    /** Its QUIC endpoint, when it runs one (same host as httpUrl). */
    quic: quicEndpoint.optional(),
    /**
     * The key its METAs are signed with (docs/protocol.md §4.2), published to clients. Required:
     * a proxy that could leave it out would keep unsigned METAs counting, and could fail
     * downloads with identities it never has to answer for.
     */
    assertionKey,
    /** Its region (locality): clients of the region are offered its proxies first. */
    region: regionName.optional(),
    /** Client address prefixes its region serves: origo maps a client by the longest that holds it. */
    prefixes: z.array(regionPrefix).max(MAX_REGION_PREFIXES).optional(),
    /** The optional MUTP features it understands (absent: the legacy set, docs/protocol.md §13). */
    capabilities: capabilityNames.optional(),
  }),
  z.object({
    type: z.literal('heartbeat'),
    activeTransfers: count,
    uploadBps: rate,
    capacityBps: rate,
    /** The proxy is shutting down: it finishes its transfers but takes no new clients. */
    draining: z.boolean().optional(),
    /** Its QUIC certificates' hashes when they changed (a rotation): current first, then next. */
    quicCertificateHashes: z.array(certificateHash).min(1).max(2).optional(),
  }),
  /** The proxy's answer or candidates for a client connection. */
  z.object(signalFields).refine(...exactlyOne),
  /** The proxy refuses or lost a client connection. */
  z.object({ type: z.literal('connection-closed'), connectionId: id, reason: z.string().max(256) }),
  /**
   * How a `stage` hint ended: the object is in the proxy's cache ('staged'; `originMs` is what
   * its origin fetch took, 0 when it was already cached), or not ('failed', with a code).
   */
  z.object({
    type: z.literal('staged'),
    clientId: id,
    requestId: id,
    ...stageOutcome,
  }),
]);

export const origoToProxy = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('registered'),
    proxyId: id,
    heartbeatIntervalMs: z.number().int().min(100),
    /** The key client tokens are signed with: the proxy verifies them offline. */
    tokenKey: tokenPublicKey,
  }),
  /**
   * A client's offer or candidate. `clientNetwork` is the network origo sees the client in
   * (addressPrefix): the proxy shares its peer slots, memory and origin fetches per network.
   */
  z.object({ ...signalFields, clientId: id, clientNetwork: clientNetwork.optional() }).refine(...exactlyOne),
  z.object({ type: z.literal('connection-closed'), connectionId: id, reason: z.string().max(256) }),
  z.object({ type: z.literal('error'), code: z.string().max(64), message: z.string().max(512) }),
  /**
   * A client's staging hint (SoftStage): fetch this object into the cache now, answer `staged`
   * with the same clientId and requestId. The proxy keeps no client state for it.
   */
  z.object({
    type: z.literal('stage'),
    clientId: id,
    clientNetwork: clientNetwork.optional(),
    requestId: id,
    url: stageUrl,
    range: stageRange.optional(),
    layout: stageLayout.optional(),
  }),
  /**
   * A conflict's verdict (docs/signalling.md, "Conflicts"): the identity this proxy signed for `url`
   * (and `range`) is not what the origin serves now. The proxy drops that version (the entry whose
   * SHA-256 is `digest`, hex, and every entry of the same origin version), so its next answer is
   * the current one. No reply.
   */
  z.object({
    type: z.literal('stale'),
    url: stageUrl,
    range: stageRange.optional(),
    digest: z.string().regex(/^[0-9a-f]{64}$/),
  }),
]);

// ------------------------------------------------------------------ client <-> origo

export const proxyInfo = z.object({
  proxyId: id,
  name: z.string().max(128),
  httpUrl: z.url().max(512),
  capacityBps: rate,
  /** The proxy's QUIC endpoint, when it runs one: clients prefer it to WebRTC. */
  quic: quicEndpoint.optional(),
  /** The key the proxy signs its METAs with: a META whose signature fails never counts. */
  assertionKey: assertionKey.optional(),
  /** A client token for this proxy only (`proxyTokenAudience`): what the client presents to it. */
  token: token.optional(),
  /** The optional MUTP features the proxy declared at registration (absent: the legacy set, docs/protocol.md §13). */
  capabilities: capabilityNames.optional(),
  /**
   * Who runs the proxy, as origo's configuration names it (absent: the operator is named like the
   * proxy id, as every proxy of an older origo). Agreeing sources must span operators, not only proxies (issue 31).
   */
  operator: id.optional(),
});

/** A renewed per-proxy token (`token` message). */
const proxyToken = z.object({ proxyId: id, token });
/** How many per-proxy tokens a renewal carries: those of the most recently offered proxies. */
export const MAX_RENEWED_PROXY_TOKENS = 16;

export const downloadRecord = z.object({
  url: z.string().min(1).max(4096),
  mode: downloadMode,
  scheduler: z.string().max(32).optional(),
  sources: z.number().int().min(1).max(32),
  bytes: count.or(
    z
      .number()
      .int()
      .min(0)
      .max(2 ** 31),
  ),
  durationMs: z.number().finite().min(0).max(3_600_000),
  goodputBps: rate,
  normalizedGoodput: z.number().min(0).max(1),
  status: z.enum(['complete', 'failed']),
  error: z.string().max(512).optional(),
  proxies: z
    .array(
      z.object({
        proxyId: id,
        received: count,
        useful: count,
        share: z.number().min(0).max(1),
      }),
    )
    .max(32),
});

export const clientToOrigo = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('hello'),
    version: z.literal(SIGNALLING_VERSION),
    /** The token of a previous session: origo keeps that client id when the token is still good. */
    token: token.optional(),
    /**
     * The optional MUTP features the client understands (docs/protocol.md §13; absent: the legacy
     * set). Informative for origo (a fleet's upgrade progress); the proxies learn it from the
     * client's REQUESTs, never from origo.
     */
    capabilities: capabilityNames.optional(),
  }),
  z.object({
    type: z.literal('request-proxies'),
    requestId: id,
    count: z.number().int().min(1).max(32),
    mode: mode.optional(),
    exclude: z.array(id).max(256).default([]),
    /**
     * The region the client believes it is in (measured or configured): a hint origo follows only
     * when the client's address is in no declared prefix and the region has enough proxies.
     */
    region: regionName.optional(),
  }),
  z.object({ ...signalFields, proxyId: id }).refine(...exactlyOne),
  z.object({ type: z.literal('connection-closed'), connectionId: id, reason: z.string().max(256) }),
  z.object({ type: z.literal('record'), record: downloadRecord }),
  /**
   * The client excluded this proxy from a download as a polluter (docs/signalling.md): its META
   * disagreed with the sources' agreed identity, its DIGESTS did not hash to its unit root, or a
   * packet of it provably differed from a verified unit. No URL: origo needs only who and why.
   */
  z.object({ type: z.literal('report'), proxyId: id, kind: z.enum(['meta', 'digests', 'data']) }),
  /**
   * Is origo (and the path to it) alive? Answered by `pong` with the same nonce. A client asks
   * after a disconnection: a socket that sat through one may be in TCP's retransmission back-off
   * for seconds after the network is back, and a fresh one is quicker (docs/signalling.md).
   */
  z.object({ type: z.literal('ping'), nonce: id }),
  /**
   * A staging hint: ask these proxies (origo offered them to this client) to fetch the object
   * into their caches before the client asks for it. Each proxy's outcome comes back as a
   * `staged` message with this requestId.
   */
  z.object({
    type: z.literal('stage'),
    requestId: id,
    url: stageUrl,
    range: stageRange.optional(),
    layout: stageLayout.optional(),
    proxyIds: z.array(id).min(1).max(MAX_STAGE_PROXIES),
  }),
  /**
   * A download failed because proxies origo offered this client signed different identities for
   * one URL and range: their signed METAs (base64), for origo to judge against the origin
   * (docs/signalling.md, "Conflicts"). No reply.
   */
  z.object({
    type: z.literal('conflict'),
    url: stageUrl,
    range: stageRange.optional(),
    statements: z.array(signedStatement).min(2).max(MAX_CONFLICT_STATEMENTS),
  }),
]);

/** Why origo withdrew a proxy from its clients (`withdrawn`): `proven-false`, a signed META the origin contradicts. */
export const withdrawReason = z.enum(['draining', 'revoked', 'proven-false']);
export type WithdrawReason = z.infer<typeof withdrawReason>;

export const origoToClient = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('welcome'),
    clientId: id,
    /** Signed client token (subject = clientId) for proxies; renewed by `token` messages. */
    token,
    /** When the token expires, ms since the epoch. */
    expiresAt: z.number().int().min(0),
  }),
  /** A renewed token, sent before the previous one expires, with the recent proxies' tokens renewed too. */
  z.object({
    type: z.literal('token'),
    token,
    expiresAt: z.number().int().min(0),
    proxyTokens: z.array(proxyToken).max(MAX_RENEWED_PROXY_TOKENS).optional(),
  }),
  z.object({
    type: z.literal('proxies'),
    requestId: id,
    proxies: z.array(proxyInfo).max(32),
    /**
     * One operator holds more than half of these proxies: origo had no other operator's proxy to
     * offer (availability over independence), so their agreement is one operator's word.
     */
    operatorsConcentrated: z.literal(true).optional(),
  }),
  z.object(signalFields).refine(...exactlyOne),
  z.object({ type: z.literal('connection-closed'), connectionId: id, reason: z.string().max(256) }),
  z.object({
    type: z.literal('error'),
    code: z.string().max(64),
    message: z.string().max(512),
    requestId: id.optional(),
  }),
  z.object({ type: z.literal('pong'), nonce: id }),
  /** One proxy's outcome of a `stage` hint (origo relays the proxy's answer, or says why it could not ask). */
  z.object({
    type: z.literal('staged'),
    requestId: id,
    proxyId: id,
    ...stageOutcome,
  }),
  /**
   * Origo no longer offers a proxy it offered this client: it drains (shutting down), pollution
   * reports stopped it, or its key was revoked. Downloads under way may finish; the client moves
   * its next ones elsewhere, between two segments (docs/signalling.md, "Withdrawn proxies").
   */
  z.object({ type: z.literal('withdrawn'), proxyId: id, reason: withdrawReason }),
]);

export type ProxyToOrigo = z.infer<typeof proxyToOrigo>;
export type OrigoToProxy = z.infer<typeof origoToProxy>;
export type ClientToOrigo = z.input<typeof clientToOrigo>;
export type OrigoToClient = z.infer<typeof origoToClient>;
export type ProxyInfo = z.infer<typeof proxyInfo>;
export type DownloadRecord = z.infer<typeof downloadRecord>;
export type ProxyReport = Extract<z.infer<typeof clientToOrigo>, { type: 'report' }>;
export type ConflictReport = Extract<z.infer<typeof clientToOrigo>, { type: 'conflict' }>;
export type TokenPublicKey = z.infer<typeof tokenPublicKey>;
export type StageHint = Extract<z.infer<typeof origoToProxy>, { type: 'stage' }>;
export type StagedByProxy = Extract<z.infer<typeof proxyToOrigo>, { type: 'staged' }>;
export type StagedAnswer = Extract<z.infer<typeof origoToClient>, { type: 'staged' }>;

/** A proxy's outcome of a hint that did not stage anything, with why (docs/signalling.md). */
export function failedStage(requestId: string, proxyId: string, error: string): StagedAnswer {
  return { type: 'staged', requestId, proxyId, status: 'failed', originMs: 0, cached: false, bytes: 0, error };
}
export type SessionDescription = z.infer<typeof sessionDescription>;
export type IceCandidate = z.infer<typeof iceCandidate>;

export type SignalResult<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * Parses one signalling frame: size, JSON and schema. Never throws; the error names the first
 * problem so a log line says what was wrong.
 */
export function parseSignal<T>(schema: z.ZodType<T>, frame: string | Uint8Array): SignalResult<T> {
  const length = typeof frame === 'string' ? frame.length : frame.byteLength;
  if (length > MAX_SIGNAL_BYTES) return { ok: false, error: `frame of ${length} bytes exceeds ${MAX_SIGNAL_BYTES}` };
  let json: unknown;
  try {
    json = JSON.parse(typeof frame === 'string' ? frame : new TextDecoder().decode(frame));
  } catch {
    return { ok: false, error: 'frame is not JSON' };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, error: `${issue.path.join('.') || 'message'}: ${issue.message}` };
  }
  return { ok: true, value: parsed.data };
}
