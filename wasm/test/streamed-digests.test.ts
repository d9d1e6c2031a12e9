/**
 * Downloads whose SHA-256 can stream (noble's and the extension's can; issue 33): a fountain unit
 * is hashed as its systematic blocks arrive (shared/src/receiver/systematic-prefix.ts) and an
 * object of several check units as they verify (object-digest.ts). The object check still proves
 * the same thing: a wrong systematic block still fails its unit and names its sender.
 */
import { createHash } from 'node:crypto';
import { DATA_FOUNTAIN_HEADER_BYTES, MessageType, Mode } from '@mutp/shared/internal';
import { loadNodeCodecs } from '../src/node';
import { asSource, download, honest, makeObject, sha256, Source } from './helpers/in-memory-transfer';

/** Bytes fed to incremental hashes in this file, and how many were started. */
const streamed = { started: 0, bytes: 0 };
// The helper's SHA-256 gains create() here, as the extension's and noble's have it.
Object.assign(sha256, {
  create() {
    streamed.started++;
    const hash = createHash('sha256');
    const stream = {
      update(data: Uint8Array) {
        streamed.bytes += data.length;
        hash.update(data);
        return stream;
      },
      digest: () => new Uint8Array(hash.digest()),
    };
    return stream;
  },
});

let codecs: Awaited<ReturnType<typeof loadNodeCodecs>>;
beforeAll(async () => {
  codecs = await loadNodeCodecs();
});
beforeEach(() => {
  streamed.started = 0;
  streamed.bytes = 0;
});

/** An honest source whose first fountain DATA (its first systematic block) has one byte flipped. */
function firstBlockCorrupted(source: Source): Source {
  let done = false;
  return {
    ...source,
    poll(now) {
      const d = source.poll(now);
      if (!d || done || d[1] !== MessageType.DataFountain) return d;
      done = true;
      const bad = d.slice();
      bad[DATA_FOUNTAIN_HEADER_BYTES + 3] ^= 0x5a;
      return bad;
    },
  };
}

function run(mode: Mode, object: Uint8Array, polluter?: number) {
  return download(
    mode,
    codecs[mode],
    object,
    (request, i) => {
      const source = asSource(honest(codecs[mode], object, request, 40 + i));
      return i === polluter ? firstBlockCorrupted(source) : source;
    },
    [3, 4, 5],
  );
}

test('fountain: the one source block is hashed while it arrives, each byte once, and verifies', () => {
  // 600 symbols of 256 bytes: one source block, one check unit, the whole object.
  const object = makeObject(600 * 256 - 77, 3);
  const { receiver } = run('fountain', object);
  expect(receiver.status).toBe('complete');
  expect(receiver.takeObject()).toEqual(object);
  expect([streamed.started, streamed.bytes]).toEqual([1, object.length]);
});

test('fountain: a wrong systematic block inside the hashed prefix fails the unit and names its sender', () => {
  const object = makeObject(600 * 256 - 77, 4);
  const { receiver } = run('fountain', object, 0);
  expect(receiver.status).toBe('complete');
  expect(receiver.stats().sources.map((s) => s.polluter)).toEqual([true, false, false]);
  expect(receiver.takeObject()).toEqual(object);
});

test('rlnc: an object of many generations is hashed as they verify, each byte once, and verifies', () => {
  const object = makeObject(100 * 256 + 31, 5);
  const { receiver } = run('rlnc', object);
  expect(receiver.status).toBe('complete');
  expect(receiver.takeObject()).toEqual(object);
  expect([streamed.started, streamed.bytes]).toEqual([1, object.length]);
});
