/**
 * The Parallel HTTP baseline (the MUTP paper's): the same object requested from every proxy's
 * HTTP endpoint at once; the first complete response that verifies wins and the others are
 * aborted.
 *
 * Integrity: every proxy states the object's SHA-256 before the body, signed with the key origo
 * published for it (http-statement.ts; `x-mutp-sha256` alone for a proxy without a known key). A
 * body is used only when it hashes to the digest that `quorum` proxies (by default two, or one
 * when only one proxy serves) stated independently and no proxy stated another: however many
 * agree, one that disagrees may be the honest one, and only the origin can tell (the download
 * fails, the caller falls back, and the signed statements of both sides go to `onConflict`, which
 * hands them to origo to judge against the origin). A proxy whose body does not hash to the
 * digest it stated itself is identified as polluting and listed in the result; the download goes
 * on with the others, which fetch the same bytes in parallel. An answer a keyed proxy did not sign
 * counts neither way.
 *
 * Progress (`onProgress`) is reported per chunk of any body as it arrives: the leading proxy's bytes
 * against the length it declared, with every proxy's count, so a display moves as bytes arrive
 * rather than once per object.
 */
import { ByteRange, MAX_RANGE_OFFSET, ObjectAttributes, ProxyInfo, servedRangeProblem, validContentType } from '..';
import { VerifySignature } from '../assertion';
import { ClientError } from './errors';
import { Clock, FetchLike } from './host';
import { DownloadProgress, SourceShare } from './download';
import { conflictEvidence, hex, HttpStatement, statementOf } from './http-statement';

export interface HttpDownloadResult {
  object: Uint8Array;
  mode: 'http';
  startedAt: number;
  durationMs: number;
  goodputBps: number;
  /** Bytes of the winning response / all bytes received from every proxy until then. */
  normalizedGoodput: number;
  sources: Pick<SourceShare, 'proxyId' | 'name' | 'bytes' | 'share'>[];
  contentType: string | null;
  /** The winner's Content-Type (when valid) and, for a ranged request, the range it served. */
  attributes?: ObjectAttributes;
  /** Proxies caught serving other bytes than the agreed object (report them to origo). */
  polluters: { proxyId: string; name: string; reason: string }[];
}

/** The proxy endpoint serving `url`, or a range of it (proxy/src/http-baseline.ts). */
export function baselineUrl(proxy: ProxyInfo, url: string, range?: ByteRange): string {
  const base = `${proxy.httpUrl.replace(/\/+$/, '')}/v1/http?url=${encodeURIComponent(url)}`;
  return range ? `${base}&start=${range.start}&length=${range.length}` : base;
}

/** Headers the baseline states a served range in (proxy/src/http-baseline.ts). */
const RANGE_START_HEADER = 'x-mutp-range-start';
const COMPLETE_LENGTH_HEADER = 'x-mutp-complete-length';

/**
 * The attributes an answer states (its signed META's when it has one, else its headers'), or why
 * they do not fit the range asked for.
 */
function attributesOf(
  headers: { get(name: string): string | null },
  statement: HttpStatement,
  range: ByteRange | undefined,
  length: number,
): ObjectAttributes | string {
  if (statement.attributes) {
    const signed = statement.attributes;
    if (!range) return signed.range ? 'a range nobody asked for' : signed;
    if (!signed.range) return 'no range stated';
    return servedRangeProblem(range, signed.range, length) ?? signed;
  }
  const attributes: ObjectAttributes = {};
  const type = headers.get('content-type');
  if (type && validContentType(type)) attributes.contentType = type;
  if (!range) return attributes;
  const start = Number(headers.get(RANGE_START_HEADER) ?? NaN);
  const completeHeader = headers.get(COMPLETE_LENGTH_HEADER);
  const complete = completeHeader === null ? undefined : Number(completeHeader);
  if (
    !Number.isSafeInteger(start) ||
    (complete !== undefined && !(Number.isSafeInteger(complete) && complete <= MAX_RANGE_OFFSET))
  )
    return `no valid ${RANGE_START_HEADER} / ${COMPLETE_LENGTH_HEADER}`;
  const served = complete === undefined ? { start } : { start, completeLength: complete };
  const problem = servedRangeProblem(range, served, length);
  if (problem) return problem;
  attributes.range = served;
  return attributes;
}

export async function runHttpDownload(
  proxies: ProxyInfo[],
  url: string,
  fetch: FetchLike,
  clock: Clock,
  options: {
    signal?: AbortSignal;
    maxBytes: number;
    sha256: (data: Uint8Array) => Uint8Array;
    /** Proxies that must state the same digest before a body is used (default min(2, proxies)). */
    quorum?: number;
    /**
     * The client token for each proxy (origo's per-proxy token), sent as `Authorization: Bearer`
     * (the proxies require one).
     */
    tokenFor?: (proxy: ProxyInfo) => string | undefined;
    /** Only these bytes of `url`. */
    range?: ByteRange;
    /** Ed25519 verification of the proxies' statements (default: portable; hosts pass a native one). */
    verifySignature?: VerifySignature;
    /** Proxies caught serving other bytes than they stated, once the download ends (report them). */
    onPolluters?: (polluters: { proxyId: string; kind: 'data'; reason: string }[]) => void;
    /** Signed statements of proxies that disagreed, once the download ends: hand them to origo. */
    onConflict?: (statements: { proxyId: string; meta: Uint8Array }[]) => void;
    /** Called per chunk of any proxy's body (bytes, not yet verified) and when a proxy fails. */
    onProgress?: (progress: DownloadProgress) => void;
  },
): Promise<HttpDownloadResult> {
  const startedAt = clock.now();
  const controllers = proxies.map(() => new AbortController());
  const received = proxies.map(() => 0);
  const states: ('connecting' | 'active' | 'failed')[] = proxies.map(() => 'connecting');
  /** The length the first proxy to answer declared (its Content-Length). */
  let declaredLength: number | undefined;
  /** Set when the download is decided: the losers' aborts that follow are not progress. */
  let settled = false;
  const reportProgress = () => {
    if (!options.onProgress || settled) return;
    // A proxy cannot move the bar past the range asked for, whatever it declares or sends.
    const length = Math.min(declaredLength ?? Infinity, options.range?.length ?? Infinity);
    const known = Number.isFinite(length) ? length : 0;
    const lead = Math.max(0, ...received.filter((_, i) => states[i] !== 'failed'));
    options.onProgress({
      dof: Math.min(lead, known),
      totalDof: known,
      bytes: known,
      liveSources: states.filter((s) => s !== 'failed').length,
      sources: proxies.length,
      sourceCounters: () =>
        proxies.map((p, i) => ({ proxyId: p.proxyId, name: p.name, bytes: received[i], state: states[i] })),
    });
  };
  const abortAll = () => controllers.forEach((c) => c.abort());
  options.signal?.addEventListener('abort', abortAll);
  // An already aborted signal fires no event: without this the fetches would still start.
  if (options.signal?.aborted) abortAll();
  const errors: string[] = [];
  const quorum = Math.max(1, Math.min(options.quorum ?? 2, proxies.length));
  const stated: (string | undefined)[] = proxies.map(() => undefined);
  const statements: (HttpStatement | undefined)[] = proxies.map(() => undefined);
  const request = { url, ...(options.range ? { range: options.range } : {}) };
  /** Settles a proxy's vote when its headers arrive or it fails (undefined: no vote). */
  const votes = proxies.map(() => {
    let settle!: (digest: string | undefined) => void;
    const voted = new Promise<string | undefined>((resolve) => (settle = resolve));
    return { voted, settle };
  });
  const settledVotes = new Set<number>();
  votes.forEach((v, j) => void v.voted.then(() => settledVotes.add(j)));
  const polluters: HttpDownloadResult['polluters'] = [];
  const polluted = (i: number, reason: string) => {
    polluters.push({ proxyId: proxies[i].proxyId, name: proxies[i].name, reason });
    controllers[i].abort();
    return new Error(`${proxies[i].name}: ${reason}`);
  };

  /** Waits until `digest` has a quorum of statements and none against, or can no longer get one. */
  const agreed = async (digest: string): Promise<boolean> => {
    for (;;) {
      if (stated.some((d) => d !== undefined && d !== digest)) return false;
      const count = stated.filter((d) => d === digest).length;
      if (count >= quorum) return true;
      const pending = votes.filter((_, j) => stated[j] === undefined && !settledVotes.has(j));
      if (count + pending.length < quorum) return false;
      await Promise.race(pending.map((v) => v.voted));
    }
  };

  const fetchOne = async (proxy: ProxyInfo, i: number) => {
    const token = options.tokenFor?.(proxy);
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    let response: Awaited<ReturnType<FetchLike>>;
    try {
      response = await fetch(baselineUrl(proxy, url, options.range), { signal: controllers[i].signal, headers });
    } catch (e) {
      votes[i].settle(undefined);
      throw e;
    }
    const statement = response.ok ? statementOf(proxy, request, response.headers, options.verifySignature) : undefined;
    if (typeof statement === 'object') {
      statements[i] = statement;
      stated[i] = statement.digest;
    }
    votes[i].settle(stated[i]);
    if (!response.ok || !response.body) throw new Error(`${proxy.name}: HTTP ${response.status}`);
    if (typeof statement !== 'object') throw new Error(`${proxy.name}: ${statement}`);
    const declared = Number(response.headers.get('content-length') ?? NaN);
    if (declared > options.maxBytes) throw new Error(`${proxy.name}: ${declared} bytes exceeds ${options.maxBytes}`);
    if (Number.isSafeInteger(declared) && declared >= 0) declaredLength ??= declared;
    states[i] = 'active';
    const chunks: Uint8Array[] = [];
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      received[i] += value.length;
      if (received[i] > options.maxBytes) throw new Error(`${proxy.name}: more than ${options.maxBytes} bytes`);
      chunks.push(value);
      reportProgress();
    }
    if (Number.isFinite(declared) && declared !== received[i])
      throw new Error(`${proxy.name}: ${received[i]} of ${declared} bytes`);
    const object = new Uint8Array(received[i]);
    let offset = 0;
    for (const c of chunks) {
      object.set(c, offset);
      offset += c.length;
    }
    const actual = hex(options.sha256(object));
    if (actual !== stated[i]) throw polluted(i, `body does not match the digest it stated`);
    if (!(await agreed(actual))) {
      if (stated.some((d) => d !== undefined && d !== actual)) {
        controllers.forEach((c) => c.abort());
        throw new Error(`${proxy.name}: the proxies disagree on the object's digest`);
      }
      throw new Error(`${proxy.name}: fewer than ${quorum} proxies stated its digest`);
    }
    const attributes = attributesOf(response.headers, statement, options.range, object.length);
    if (typeof attributes === 'string') throw new Error(`${proxy.name}: ${attributes}`);
    return { object, index: i, contentType: response.headers.get('content-type'), attributes };
  };

  try {
    const winner = await Promise.any(
      proxies.map((p, i) =>
        fetchOne(p, i).catch((e: unknown) => {
          errors.push(e instanceof Error ? e.message : String(e));
          states[i] = 'failed';
          reportProgress();
          throw e;
        }),
      ),
    );
    const durationMs = Math.max(clock.now() - startedAt, 1e-3);
    const total = received.reduce((a, b) => a + b, 0);
    return {
      object: winner.object,
      mode: 'http',
      startedAt,
      durationMs,
      goodputBps: (winner.object.length * 1000) / durationMs,
      normalizedGoodput: total > 0 ? winner.object.length / total : 1,
      sources: proxies.map((p, i) => ({
        proxyId: p.proxyId,
        name: p.name,
        bytes: received[i],
        share: i === winner.index ? 1 : 0,
      })),
      contentType: winner.contentType,
      attributes: winner.attributes,
      polluters,
    };
  } catch {
    if (options.signal?.aborted) throw new ClientError('cancelled', 'aborted');
    throw new ClientError('http-failed', errors.join('; ') || 'no proxy answered');
  } finally {
    settled = true;
    abortAll();
    options.signal?.removeEventListener('abort', abortAll);
    if (polluters.length > 0) options.onPolluters?.(polluters.map((p) => ({ ...p, kind: 'data' as const })));
    const evidence = conflictEvidence(proxies, statements);
    if (evidence.length > 0) options.onConflict?.(evidence);
  }
}
