/**
 * How a shield parent's answer carries an object to a child: the bytes, and what the parent says
 * of them (where they sit, the version it fetched, their SHA-256). Whole (the parent holds the
 * object: Content-Length and those fields as headers) or streamed (the parent's own fetch is
 * under way: the bytes pass on as they arrive, chunked, and the fields follow as trailers once the
 * fetch is done, since only then are they known). A child asks for a stream with `TE: trailers`;
 * a child that does not gets the whole answer.
 *
 * A streamed answer that cannot end as a whole one would (the fetch failed, or its entry is not
 * the bytes streamed: an origin that ignored a Range) is cut off without its trailers: the child
 * sees a broken answer and asks the origin, as for any parent failure.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BodyStream } from './fetch-streams';
import type { CachedObject } from './object-cache';

/** Headers (or trailers) of the parent's answer with the range and digest of the bytes. */
export const SHIELD_HEADERS = {
  rangeStart: 'x-mutp-range-start',
  completeLength: 'x-mutp-complete-length',
  sha256: 'x-mutp-sha256',
  /** The validator the parent's copy was fetched under: `etag <value>` or `last-modified <value>`. */
  validator: 'x-mutp-validator',
} as const;

/** What the parent says of an object it sends (headers of a whole answer, trailers of a streamed one). */
export function objectFields(object: CachedObject): Record<string, string> {
  const { validator } = object.provenance;
  return {
    [SHIELD_HEADERS.sha256]: Buffer.from(object.digest).toString('hex'),
    ...(validator ? { [SHIELD_HEADERS.validator]: `${validator.kind} ${validator.value}` } : {}),
    ...(object.range
      ? {
          [SHIELD_HEADERS.rangeStart]: String(object.range.start),
          ...(object.range.completeLength !== undefined
            ? { [SHIELD_HEADERS.completeLength]: String(object.range.completeLength) }
            : {}),
        }
      : {}),
  };
}

/** Whether the child takes a streamed answer (it said so with `TE: trailers`). */
export function acceptsStream(req: IncomingMessage): boolean {
  const te = req.headers.te;
  return typeof te === 'string' && /(^|,)\s*trailers\s*(;|,|$)/i.test(te);
}

/**
 * Whether the stream has bytes to pass on: waits for its first chunk, or for it to settle
 * without any (a failed fetch, an empty object: answered whole, with a proper status).
 */
export async function hasBytes(stream: BodyStream): Promise<boolean> {
  while (stream.length === 0 && !stream.settled) await stream.changed();
  return stream.length > 0;
}

export type StreamOutcome = 'streamed' | 'gone' | 'failed';

/**
 * Sends the fetch's body to the child as it arrives, then the rest from the entry `got` gives
 * and the fields as trailers. `onBytes` is told every write (the child's byte budget).
 */
export async function streamToChild(
  res: ServerResponse,
  stream: BodyStream,
  got: Promise<CachedObject>,
  onBytes: (bytes: number) => void,
): Promise<StreamOutcome> {
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    'cache-control': 'no-store',
    trailer: Object.values(SHIELD_HEADERS).join(', '),
  });
  let index = 0;
  let sent = 0;
  for (let chunks = stream.chunksFrom(0); chunks; chunks = stream.chunksFrom(index)) {
    if (chunks.length === 0) await stream.changed();
    for (const chunk of chunks) {
      if (!(await write(res, chunk))) return 'gone';
      index++;
      sent += chunk.byteLength;
      onBytes(chunk.byteLength);
    }
  }
  let object: CachedObject;
  try {
    object = await got;
  } catch {
    res.destroy();
    return 'failed';
  }
  // The raw body is the entry's bytes unless the origin sent more than the range (then sliced).
  if (stream.length !== object.bytes.byteLength) {
    res.destroy();
    return 'failed';
  }
  // The rest comes from the entry: held (charged to the cache) until the child has it.
  const release = object.hold();
  res.once('close', release);
  const rest = object.bytes.subarray(sent);
  if (rest.byteLength > 0) {
    if (!(await write(res, rest))) return 'gone';
    onBytes(rest.byteLength);
  }
  res.addTrailers(objectFields(object));
  res.end();
  return 'streamed';
}

/** Writes with back-pressure: resolves once the socket takes more (true) or the child is gone (false). */
function write(res: ServerResponse, bytes: Uint8Array): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  if (res.write(bytes)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const settle = (ok: boolean) => () => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = settle(true);
    const onClose = settle(false);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}
