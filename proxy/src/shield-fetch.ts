/**
 * A shield child's misses (docs/deploy.md "Origin shielding"): the object's bytes come from the
 * parent proxy (shield-endpoint.ts), and what is said about them from the origin itself. At the
 * same time as the parent is asked, the origin is asked for one byte of the object (a ranged
 * GET): its answer gives the version (validators), the size, the cache policy and the type the
 * cache stores, and Repr-Digest when the origin sends one. Then, unless the digest checks every
 * byte, a few ranges chosen at random (about `sampleFraction` of the bytes together) are fetched
 * from the origin and compared with the parent's bytes.
 *
 * The parent's bytes are used only when everything agrees. A parent that fails (down, refusing,
 * slower than `timeoutMs`, too large an answer) or whose bytes are of another version or differ
 * from the origin's evidence is passed over: the object is fetched from the origin as without a
 * parent, and the metrics and log name the parent (`parent-lied` for bytes that differ). So a
 * parent can cost a child time, never a transfer. An origin that does not answer ranges (its
 * whole object came with the first byte's request) is simply used.
 *
 * The parent's answer may stream (its own fetch still under way, shield-stream.ts): the bytes
 * arrive sooner, and are still used only once all of them are here and checked. A parent that
 * refuses the request as part of a loop of parents (shield-chain.ts) is passed over as
 * `parent-loop`.
 */
import { randomInt } from 'node:crypto';
import { Agent, IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Logger } from 'pino';
import type { ByteRange } from '@mutp/shared';
import { ServeError } from './errors';
import type { ProxyMetrics } from './metrics';
import type { FetchControl, FetchedBytes, ObjectFetcher } from './origin-fetches';
import { signShieldRequest } from './shield-auth';
import { currentShieldChain } from './shield-chain';
import { SHIELD_HEADERS } from './shield-stream';
import { RandomInt, reprDigestSha256, sampleMismatch, sampleRanges, sha256Equals, validatorOf } from './shield-verify';

export interface ShieldFetchOptions {
  /** The parent's shield endpoint, e.g. http://10.0.0.5:8801 (the fleet's network). */
  parentUrl: string;
  /** The fleet's shield key. */
  key: string;
  /** This proxy's name as the parent budgets it. */
  child: string;
  /** Largest object taken from the parent (the proxy's --max-object-bytes). */
  maxBytes: number;
  /** The parent's whole answer must arrive within this long, else the origin is asked. */
  timeoutMs: number;
  /** Bytes sampled from the origin, as a fraction of the object's (without Repr-Digest). */
  sampleFraction: number;
  /** Ranges sampled (their bytes together are sampleFraction of the object). */
  samples: number;
  metrics: ProxyMetrics;
  logger: Logger;
  random?: RandomInt;
}

export const DEFAULT_SHIELD_SAMPLE_FRACTION = 0.02;
export const DEFAULT_SHIELD_SAMPLES = 2;
export const DEFAULT_SHIELD_TIMEOUT_MS = 10_000;

/**
 * Why the parent's bytes were not used: it failed, had another version, sent bytes the origin's
 * evidence contradicts, or the origin gave nothing to check them against.
 */
type Passed = 'parent-failed' | 'parent-loop' | 'parent-stale' | 'parent-lied' | 'unchecked';

/** The parent refused the request as part of a loop of parents (or too long a chain): shield-chain.ts. */
class LoopRefused extends Error {}

interface ParentAnswer {
  bytes: Uint8Array;
  rangeStart?: number;
  completeLength?: number;
  validator?: string;
}

/** Wraps the origin fetch of a proxy's cache (ObjectCache.shieldWith) in the shield. */
export function shieldFetcher(origin: ObjectFetcher, o: ShieldFetchOptions): ObjectFetcher {
  const random = o.random ?? ((max: number) => randomInt(max));
  const log = o.logger.child({ component: 'shield', parent: o.parentUrl });
  const countOrigin = (bytes: number) => o.metrics.shieldBytes.inc({ source: 'origin-check' }, bytes);
  // Connections to the parent are kept open between misses (one round trip less per object).
  const agent = new (o.parentUrl.startsWith('https:') ? HttpsAgent : Agent)({ keepAlive: true, maxSockets: 64 });

  return async (url, control) => {
    // The checks' own requests (parent, probe, samples) end with this call: none of them may
    // reserve memory once the cache has given back what this fetch held.
    const checks = new AbortController();
    const scoped: FetchControl = {
      signal: AbortSignal.any([control.signal, checks.signal]),
      reserve: (bytes) => !checks.signal.aborted && control.reserve(bytes),
    };
    const passOver = (why: Passed, detail: string): Promise<FetchedBytes> => {
      checks.abort();
      o.metrics.shieldFetches.inc({ outcome: why });
      (why === 'parent-lied' ? log.warn.bind(log) : log.info.bind(log))(
        { url, why, detail },
        'shield parent passed over',
      );
      return origin(url, control);
    };
    const started = performance.now();
    const since = () => Math.round(performance.now() - started);
    try {
      const parentSignal = AbortSignal.any([scoped.signal, AbortSignal.timeout(o.timeoutMs)]);
      // Settles to the answer or the reason it failed: a parent never fails the fetch.
      const parent = askParent(o, agent, url, { ...scoped, range: control.range }, parentSignal).catch((e: unknown) =>
        e instanceof Error ? e : new Error(String(e)),
      );
      let probe: FetchedBytes;
      try {
        probe = await origin(url, { ...scoped, range: { start: control.range?.start ?? 0, length: 1 } });
      } catch (e) {
        // No evidence to check against (an empty object, an origin refusing or down): the origin's
        // own answer to the real request decides.
        return await passOver('unchecked', `origin probe: ${(e as Error).message}`);
      }
      countOrigin(probe.bytes.byteLength);
      if (probe.wholeBody || !probe.range) {
        // The origin ignored the Range: it sent the object itself, nothing to take from the parent.
        o.metrics.shieldFetches.inc({ outcome: 'origin-direct' });
        return probe;
      }
      const extent = extentOf(control.range, probe.range.completeLength);
      if (!extent) return await passOver('unchecked', 'origin gave no complete length');
      const digest = control.range ? undefined : reprDigestSha256(probe.reprDigest);
      const samples = digest
        ? []
        : sampleRanges(extent, o.sampleFraction, o.samples, random).map((range) =>
            origin(url, { ...scoped, range }).then((r) => {
              countOrigin(r.bytes.byteLength);
              return r;
            }),
          );
      // Awaited by the check, or dropped when the parent fails first: never an unhandled rejection.
      for (const sample of samples) sample.catch(() => undefined);
      const probeMs = since();
      const answer = await parent;
      const parentMs = since();
      if (answer instanceof Error)
        return await passOver(answer instanceof LoopRefused ? 'parent-loop' : 'parent-failed', answer.message);
      const problem = await checkAnswer(answer, probe, extent, digest, samples);
      if (problem) return await passOver(problem[0], problem[1]);
      o.metrics.shieldFetches.inc({ outcome: 'verified' });
      log.debug({ url, probeMs, parentMs, checkedMs: since() }, "shield: the parent's bytes verified");
      // Passed on only now, checked (a parent above this one streams what it has, unchecked or not).
      control.onBody?.(answer.bytes);
      return {
        bytes: answer.bytes,
        contentType: probe.contentType,
        cacheControl: probe.cacheControl,
        expires: probe.expires,
        date: probe.date,
        etag: probe.etag,
        lastModified: probe.lastModified,
        ...(control.range ? { range: { start: extent.start, completeLength: probe.range.completeLength } } : {}),
        fromParent: true,
      };
    } finally {
      checks.abort();
    }
  };
}

/** The bytes a request covers, given the resource's size (undefined: unknown size, no way to check). */
function extentOf(range: ByteRange | undefined, completeLength: number | undefined): ByteRange | undefined {
  if (completeLength === undefined) return undefined;
  if (!range) return { start: 0, length: completeLength };
  return { start: range.start, length: Math.max(0, Math.min(range.length, completeLength - range.start)) };
}

/** Why the parent's answer is not the origin's object, or undefined when all evidence agrees. */
async function checkAnswer(
  answer: ParentAnswer,
  probe: FetchedBytes,
  extent: ByteRange,
  digest: Buffer | undefined,
  samples: Promise<FetchedBytes>[],
): Promise<[Passed, string] | undefined> {
  const version = validatorOf(probe);
  if (answer.validator !== version) return ['parent-stale', `parent has ${answer.validator}, origin ${version}`];
  const start = answer.rangeStart ?? 0;
  if (start !== extent.start || answer.bytes.byteLength !== extent.length)
    return [
      'parent-lied',
      `parent sent ${answer.bytes.byteLength} bytes at ${start}, origin has ${extent.length} at ${extent.start}`,
    ];
  if (answer.completeLength !== undefined && answer.completeLength !== probe.range?.completeLength)
    return ['parent-lied', 'parent states another complete length'];
  if (
    sampleMismatch(answer.bytes, start, { start: extent.start, bytes: probe.bytes.subarray(0, extent.length ? 1 : 0) })
  )
    return ['parent-lied', 'first byte differs'];
  if (digest) return sha256Equals(answer.bytes, digest) ? undefined : ['parent-lied', 'Repr-Digest differs'];
  for (const settled of await Promise.allSettled(samples)) {
    // A sample the origin did not give leaves the parent unchecked: not used.
    if (settled.status === 'rejected') return ['unchecked', `origin sample: ${String(settled.reason)}`];
    const sample = settled.value;
    if (validatorOf(sample) !== version) return ['parent-stale', 'the origin changed during the check'];
    if (!sample.range || sample.wholeBody) return ['unchecked', 'origin sample without a range'];
    if (sampleMismatch(answer.bytes, start, { start: sample.range.start, bytes: sample.bytes }))
      return ['parent-lied', `bytes at ${sample.range.start} differ`];
  }
  return undefined;
}

/**
 * The parent's answer for `url` (and the control's range), read under the memory budget: whole
 * (Content-Length, the fields as headers) or streamed while the parent's own fetch runs (chunked,
 * the fields as trailers: shield-stream.ts). Every byte received counts as the parent's.
 */
async function askParent(
  o: ShieldFetchOptions,
  agent: Agent,
  url: string,
  control: FetchControl,
  signal: AbortSignal,
): Promise<ParentAnswer> {
  const target = new URL('/v1/shield', o.parentUrl);
  target.searchParams.set('url', url);
  if (control.range) {
    target.searchParams.set('start', String(control.range.start));
    target.searchParams.set('length', String(control.range.length));
  }
  // The children this miss came through (this proxy as a parent), carried on: loops are refused.
  const via = currentShieldChain();
  const authorization = signShieldRequest(o.key, o.child, { url, range: control.range, via });
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    send(target, { agent, signal, headers: { authorization, te: 'trailers' } }, resolve)
      .once('error', reject)
      .end();
  });
  const lengthHeader = res.headers['content-length'];
  const length = lengthHeader === undefined ? undefined : Number(lengthHeader);
  if (res.statusCode === 508) {
    res.destroy();
    throw new LoopRefused('the parent refused a loop of parents');
  }
  if (
    res.statusCode !== 200 ||
    (length !== undefined && (!Number.isSafeInteger(length) || length < 0 || length > o.maxBytes))
  ) {
    res.destroy();
    throw new ServeError('origin-error', `parent answered ${res.statusCode} with ${lengthHeader} bytes`);
  }
  // A stated length is read into one buffer; a streamed body is gathered and joined (a second
  // copy while the chunks await collection: charged too).
  const whole = length === undefined ? undefined : new Uint8Array(length);
  const chunks: Buffer[] = [];
  let received = 0;
  for await (const chunk of res) {
    const part = chunk as Buffer;
    if (received + part.byteLength > (length ?? o.maxBytes))
      throw new ServeError('origin-error', 'parent sent more than it said or than an object may have');
    if (!control.reserve(part.byteLength)) throw new ServeError('overloaded', 'memory budget full');
    o.metrics.shieldBytes.inc({ source: 'parent' }, part.byteLength);
    if (whole) whole.set(part, received);
    else chunks.push(part);
    received += part.byteLength;
  }
  if (length !== undefined && received !== length) throw new ServeError('origin-error', 'parent answer cut short');
  // A streamed answer ends with its trailers; without them it was cut off (the parent's fetch failed).
  const fields = length === undefined ? res.trailers : res.headers;
  if (length === undefined && fields[SHIELD_HEADERS.sha256] === undefined)
    throw new ServeError('origin-error', 'streamed parent answer without its trailers');
  if (!whole && chunks.length > 1 && !control.reserve(received))
    throw new ServeError('overloaded', 'memory budget full');
  const bytes = whole ?? (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received));
  const header = (name: string) => {
    const v = fields[name];
    return typeof v === 'string' ? v : undefined;
  };
  const numeric = (name: string) => {
    const v = header(name);
    return v !== undefined && /^\d{1,16}$/.test(v) ? Number(v) : undefined;
  };
  return {
    bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    rangeStart: numeric(SHIELD_HEADERS.rangeStart),
    completeLength: numeric(SHIELD_HEADERS.completeLength),
    validator: header(SHIELD_HEADERS.validator),
  };
}
