/**
 * Byte ranges in the protocol: the REQUEST's range and META's attributes on the wire, and ranged
 * transfers between real SourceEndpoints and Receivers (the core both the proxy and the client
 * run): any split of a file into ranges, in any order, overlapping, at the end of the file, is
 * served byte-exact with the origin's attributes; a source that serves other bytes or relabels
 * them is excluded.
 */
import { sha256 } from '@noble/hashes/sha256';
import {
  Admission,
  ByteRange,
  decode,
  encodeMeta,
  encodeRequest,
  ErrorCode,
  MAX_OBJECT_BYTES,
  MAX_RANGE_OFFSET,
  MessageType,
  META_BYTES,
  ObjectAttributes,
  Receiver,
  rlncCodec,
  seededRandom,
  servedRangeProblem,
  SharedEncoders,
  SourceEndpoint,
  SourceObject,
  uncodedCodec,
} from '../src/internal';
import { objectOf } from './helpers/fake-host';

const URL_ = 'https://cdn.example/movie.mp4';

function request(range?: ByteRange) {
  return {
    transferId: 7,
    mode: 'rlnc' as const,
    scheduler: 'partitioned' as const,
    sourceIndex: 0,
    sourceCount: 1,
    window: 240,
    generationSize: 24,
    symbolSize: 1120,
    url: URL_,
    ...(range ? { range } : {}),
  };
}

function meta(attributes?: ObjectAttributes) {
  return {
    transferId: 7,
    objectLength: 1000,
    symbolSize: 1120,
    generationSize: 24,
    mode: 'rlnc' as const,
    digest: new Uint8Array(32).fill(1),
    unitRoot: new Uint8Array(32).fill(2),
    ...(attributes ? { attributes } : {}),
  };
}

describe('wire: ranges and attributes', () => {
  test('a REQUEST with a range round-trips; without one it is byte-for-byte what it was', () => {
    const plain = encodeRequest(request());
    expect(plain.length).toBe(17 + URL_.length);
    const ranged = encodeRequest(request({ start: 2 ** 40 + 5, length: 1 << 20 }));
    expect(ranged.length).toBe(plain.length + 10);
    const decoded = decode(ranged);
    expect(decoded.ok && decoded.value).toMatchObject({
      type: MessageType.Request,
      url: URL_,
      range: { start: 2 ** 40 + 5, length: 1 << 20 },
    });
    const back = decode(plain);
    expect(back.ok && 'range' in back.value).toBe(false);
  });

  test('a REQUEST whose range is empty, too long or past the largest offset is rejected', () => {
    for (const range of [
      { start: 0, length: 0 },
      { start: 0, length: MAX_OBJECT_BYTES + 1 },
      { start: MAX_RANGE_OFFSET, length: 2 },
    ]) {
      expect(() => encodeRequest(request(range))).toThrow(RangeError);
      // Written by hand: the decoder refuses what the encoder would not make.
      const bytes = encodeRequest(request({ start: 0, length: 1 }));
      const v = new DataView(bytes.buffer);
      v.setUint16(17 + URL_.length, Math.floor(range.start / 2 ** 32));
      v.setUint32(17 + URL_.length + 2, range.start % 2 ** 32);
      v.setUint32(17 + URL_.length + 6, range.length % 2 ** 32);
      const r = decode(bytes);
      expect(!r.ok && r.error.code).toBe('out-of-range');
    }
  });

  test('a REQUEST with a partial range field is truncated or has trailing bytes', () => {
    const ranged = encodeRequest(request({ start: 1, length: 1 }));
    const cut = decode(ranged.subarray(0, ranged.length - 1));
    expect(!cut.ok && cut.error.code).toBe('trailing-bytes');
    // One byte more would be a weight (sourceCount 1, see the initial-weights tests); two are not.
    const longer = new Uint8Array(ranged.length + 2);
    longer.set(ranged);
    const r = decode(longer);
    expect(!r.ok && r.error.code).toBe('trailing-bytes');
  });

  test.each<[string, ObjectAttributes]>([
    ['content type only', { contentType: 'video/mp4' }],
    ['a range with a complete length', { contentType: 'video/mp4', range: { start: 5000, completeLength: 2 ** 31 } }],
    ['a range of a resource of unknown length', { range: { start: 0 } }],
  ])('META with %s round-trips', (_name, attributes) => {
    const bytes = encodeMeta(meta(attributes));
    expect(bytes.length).toBe(META_BYTES + 14 + (attributes.contentType?.length ?? 0));
    const r = decode(bytes);
    expect(r.ok && r.value).toMatchObject({ type: MessageType.Meta, attributes });
  });

  test('META without attributes stays exactly 78 bytes', () => {
    expect(encodeMeta(meta()).length).toBe(META_BYTES);
    expect(encodeMeta(meta({})).length).toBe(META_BYTES);
  });

  test('META attributes with reserved flags, a complete length without a range, or a bad type are rejected', () => {
    const base = encodeMeta(meta({ contentType: 'video/mp4', range: { start: 1, completeLength: 10 } }));
    const cases: [string, (b: Uint8Array) => void, string][] = [
      ['reserved flag', (b) => (b[META_BYTES] |= 0x80), 'out-of-range'],
      ['complete length without a range', (b) => (b[META_BYTES] = 0x02), 'out-of-range'],
      ['control character in the type', (b) => (b[META_BYTES + 14] = 0x0a), 'out-of-range'],
      ['type length past the end', (b) => (b[META_BYTES + 13] = 20), 'truncated'],
    ];
    for (const [name, spoil, code] of cases) {
      const bytes = base.slice();
      spoil(bytes);
      const r = decode(bytes);
      expect([name, !r.ok && r.error.code]).toEqual([name, code]);
    }
    expect(() => encodeMeta(meta({ contentType: 'text/html\r\nx: y' }))).toThrow(RangeError);
    const short = decode(base.subarray(0, META_BYTES + 5));
    expect(!short.ok && short.error.code).toBe('truncated');
  });
});

describe('servedRangeProblem', () => {
  test('accepts the asked bytes, or fewer only where the resource ends', () => {
    expect(servedRangeProblem({ start: 10, length: 5 }, { start: 10, completeLength: 100 }, 5)).toBeUndefined();
    expect(servedRangeProblem({ start: 10, length: 50 }, { start: 10, completeLength: 20 }, 10)).toBeUndefined();
    expect(servedRangeProblem({ start: 10, length: 5 }, { start: 11 }, 5)).toMatch(/asked from 10/);
    expect(servedRangeProblem({ start: 10, length: 5 }, { start: 10 }, 6)).toMatch(/asked for 5/);
    expect(servedRangeProblem({ start: 10, length: 50 }, { start: 10 }, 10)).toMatch(/without a complete length/);
    expect(servedRangeProblem({ start: 10, length: 50 }, { start: 10, completeLength: 100 }, 10)).toMatch(/short/);
  });
});

/** A source that serves ranges of `file` as an origin with Range support would. */
interface Origin {
  file: Uint8Array;
  contentType: string;
  /** Spoils what this source serves (a hostile proxy). */
  tamper?: (object: SourceObject) => SourceObject;
}

function serve(origin: Origin, admission: Admission, range: ByteRange | undefined): SourceObject | number {
  const { file } = origin;
  let bytes = file;
  let served: SourceObject['range'];
  if (range) {
    if (range.start >= file.length) return ErrorCode.RangeNotSatisfiable;
    bytes = file.subarray(range.start, Math.min(file.length, range.start + range.length));
    served = { start: range.start, completeLength: file.length };
  }
  const object: SourceObject = {
    bytes,
    digest: sha256(bytes),
    encoders: new SharedEncoders(bytes, admission.memory),
    cached: true,
    contentType: origin.contentType,
    ...(served ? { range: served } : {}),
  };
  return origin.tamper ? origin.tamper(object) : object;
}

/**
 * Downloads `range` of the file from one endpoint per origin (one source each), in 1 ms steps
 * with no loss; returns the receiver when it has finished.
 */
function rangedDownload(origins: Origin[], range: ByteRange | undefined, transferId: number, mode: 'rlnc' | 'uncoded') {
  const codec = mode === 'rlnc' ? rlncCodec : uncodedCodec;
  const admission = new Admission({ maxTransfers: 64, maxPerClient: 4, memoryBytes: 256 << 20 });
  const endpoints = origins.map(
    () =>
      new SourceEndpoint({
        clientKey: 'c',
        codecs: { rlnc: rlncCodec, uncoded: uncodedCodec },
        admission,
        seed: () => 3,
        now: 0,
      }),
  );
  const rx = new Receiver({
    transferId,
    url: URL_,
    mode,
    sourceCount: origins.length,
    window: 240,
    generationSize: mode === 'rlnc' ? 24 : 1,
    symbolSize: 1120,
    codec,
    now: 0,
    ...(range ? { range } : {}),
  });
  let t = 0;
  for (; t < 30_000 && rx.status === 'active'; t++) {
    for (let out = rx.pollDatagram(t); out; out = rx.pollDatagram(t))
      endpoints[out.source].handleDatagram(out.bytes, t);
    endpoints.forEach((ep, i) => {
      for (let e = ep.pollEvent(); e; e = ep.pollEvent()) {
        if (e.type !== 'fetch') continue;
        const served = serve(origins[i], admission, e.range);
        if (typeof served === 'number') ep.objectFailed(e.transferId, served, 'range not satisfiable', t);
        else ep.objectReady(e.transferId, served, t);
      }
      if ((ep.nextDeadline() ?? Infinity) <= t) ep.handleTimeout(t);
      for (let c = ep.pollControl(); c; c = ep.pollControl()) rx.handleDatagram(i, c, t);
      for (let k = 0; k < 16; k++) {
        const d = ep.pollDatagram(t);
        if (!d) break;
        rx.handleDatagram(i, d, t);
      }
    });
    if ((rx.nextDeadline() ?? Infinity) <= t) rx.handleTimeout(t);
  }
  return rx;
}

describe('ranged transfers through SourceEndpoint and Receiver', () => {
  const file = objectOf(200_000, 11);
  const honest: Origin = { file, contentType: 'video/mp4' };

  test('any split of a file into ranges, in any order, overlapping, is served byte-exact (seeded)', () => {
    const next = seededRandom(20261123);
    const random = () => next() / 2 ** 32;
    const int = (n: number) => Math.floor(random() * n);
    for (let round = 0; round < 4; round++) {
      // Cut points make a split; some ranges are stretched over their neighbours (overlaps), and
      // the last may ask past the end of the file.
      const cuts = new Set<number>([0, file.length]);
      for (let i = 0; i < 3; i++) cuts.add(int(file.length));
      const points = [...cuts].sort((a, b) => a - b);
      const ranges: ByteRange[] = [];
      for (let i = 0; i + 1 < points.length; i++) {
        const start = Math.max(0, points[i] - (random() < 0.3 ? int(5000) : 0));
        const end = points[i + 1] + (random() < 0.3 ? int(5000) : 0);
        ranges.push({ start, length: end - start });
      }
      ranges.sort(() => random() - 0.5);
      const covered = new Uint8Array(file.length);
      ranges.forEach((range, k) => {
        const mode = k % 2 === 0 ? 'rlnc' : 'uncoded';
        const rx = rangedDownload([honest, honest], range, 100 + round * 10 + k, mode);
        expect([range, rx.status]).toEqual([range, 'complete']);
        const expected = file.subarray(range.start, Math.min(file.length, range.start + range.length));
        expect(
          Buffer.from(rx.attributes?.range ? rx.takeObject() : new Uint8Array()).equals(Buffer.from(expected)),
        ).toBe(true);
        expect(rx.attributes).toEqual({
          contentType: 'video/mp4',
          range: { start: range.start, completeLength: file.length },
        });
        covered.fill(1, range.start, range.start + expected.length);
      });
      expect(covered.every((c) => c === 1)).toBe(true);
    }
  });

  test('a range starting past the end fails with every source saying it is not satisfiable', () => {
    const rx = rangedDownload([honest, honest], { start: file.length, length: 10 }, 1, 'rlnc');
    expect(rx.status).toBe('failed');
    expect(rx.error?.message).toMatch(/range not satisfiable \(8\)/);
  });

  test('a source whose META places the bytes elsewhere in the file is excluded as a polluter', () => {
    // Our endpoint never sends such a META (it checks the origin's range itself): a hostile proxy does.
    const rx = new Receiver({
      transferId: 9,
      url: URL_,
      mode: 'rlnc',
      sourceCount: 3,
      window: 240,
      generationSize: 24,
      symbolSize: 1120,
      codec: rlncCodec,
      now: 0,
      range: { start: 1000, length: 1000 },
    });
    // Elsewhere; whole (no range); shorter than asked without the resource ending there.
    const bad: [number, ObjectAttributes | undefined, number][] = [
      [0, { range: { start: 1001, completeLength: 5000 } }, 1000],
      [1, undefined, 1000],
      [2, { range: { start: 1000, completeLength: 5000 } }, 999],
    ];
    for (const [source, attributes, objectLength] of bad)
      rx.handleDatagram(source, encodeMeta({ ...meta(attributes), objectLength, transferId: 9 }), 1);
    expect(rx.polluters().map((p) => [p.source, p.kind])).toEqual([
      [0, 'meta'],
      [1, 'meta'],
      [2, 'meta'],
    ]);
    expect(rx.polluters()[0].reason).toMatch(/asked from 1000/);
  });

  test('a source relabelling the bytes (another Content-Type) is a conflict the others cannot outvote', () => {
    const relabel: Origin = { ...honest, contentType: 'text/html' };
    const rx = rangedDownload([honest, relabel, honest], { start: 0, length: 50_000 }, 3, 'rlnc');
    expect(rx.status).toBe('failed');
    expect(rx.error?.code).toBe('metadata-conflict');
    expect(rx.attributes).toBeUndefined();
    expect(rx.polluters()).toEqual([]);
  });

  test('a whole-object answer to a ranged request, or a ranged one to a whole request, is not used', () => {
    const whole: Origin = { ...honest, tamper: (o) => ({ ...o, range: undefined }) };
    const rx = rangedDownload([whole, honest, honest], { start: 0, length: 10_000 }, 4, 'rlnc');
    // The endpoint itself refuses to serve a ranged REQUEST with an object without its range.
    expect(rx.status).toBe('complete');
    expect(rx.stats().sources[0].state).toBe('failed');
    const plain = rangedDownload([honest], undefined, 5, 'rlnc');
    expect(plain.status).toBe('complete');
    expect(plain.attributes).toEqual({ contentType: 'video/mp4' });
  });
});
