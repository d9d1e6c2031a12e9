/**
 * prepareObject (a staged object readied for the layout its client will REQUEST with): digests
 * computed, every unit prepared with a turn of the event loop before each, the encoder parked for
 * the transfer, the bytes held only meanwhile; an abort stops between units; a full memory budget
 * is the caller's error and leaves nothing behind.
 */
import {
  Codec,
  EncoderBudgetError,
  encoderBytesOf,
  IdleEncoders,
  Layout,
  LayoutDigests,
  MemoryBudget,
  prepareObject,
  rlncCodec,
  SharedEncoders,
  unitDigests,
} from '../src/internal';

const OBJECT = new Uint8Array(4096).map((_, i) => (i * 7) & 0xff);
/** 64 symbols of 64 bytes in generations of 8: 8 units. */
const LAYOUT = new Layout('rlnc', OBJECT.length, 64, 8);

/** rlncCodec with a `prepare` that records the order of its calls among the turns. */
function preparingCodec(log: string[]) {
  let built = 0;
  const codec: Codec = {
    ...rlncCodec,
    createEncoder: (object, layout) => {
      built++;
      const inner = rlncCodec.createEncoder(object, layout);
      return { ...inner, prepare: (unit) => void log.push(`prepare ${unit}`), free: () => inner.free() };
    },
  };
  return { codec, built: () => built };
}

function pooledObject(budgetBytes = 1 << 20) {
  const budget = new MemoryBudget(budgetBytes);
  const pool = new IdleEncoders(budget, 1 << 20);
  const encoders = new SharedEncoders(OBJECT, budget);
  encoders.keepIdleIn(pool);
  const holds = { taken: 0, released: 0 };
  const object = {
    encoders,
    digests: new LayoutDigests(OBJECT),
    hold: () => {
      holds.taken++;
      return () => void holds.released++;
    },
  };
  return { budget, pool, object, holds };
}

test('every unit is prepared after a turn, the digests are ready and the encoder is parked', async () => {
  const log: string[] = [];
  const { codec, built } = preparingCodec(log);
  const { pool, object, holds, budget } = pooledObject();
  await prepareObject(object, codec, LAYOUT, async () => void log.push('turn'));
  expect(log).toEqual(Array.from({ length: LAYOUT.unitCount }, (_, u) => ['turn', `prepare ${u}`]).flat());
  expect(holds).toEqual({ taken: 1, released: 1 });
  expect(pool.count).toBe(1);
  expect(budget.used).toBe(encoderBytesOf(codec, OBJECT.length));
  // The transfer's lease takes the prepared encoder; its digests are the ones computed.
  object.encoders.lease(codec, LAYOUT).free();
  expect(built()).toBe(1);
  expect(object.digests.of(LAYOUT)).toEqual(unitDigests(OBJECT, LAYOUT));
});

test('an abort stops between units and still parks what was made', async () => {
  const log: string[] = [];
  const { codec } = preparingCodec(log);
  const { pool, object, holds } = pooledObject();
  const controller = new AbortController();
  await prepareObject(
    object,
    codec,
    LAYOUT,
    async () => {
      log.push('turn');
      if (log.length === 3) controller.abort();
    },
    controller.signal,
  );
  // Aborted during the second turn: unit 1 is not prepared.
  expect(log).toEqual(['turn', 'prepare 0', 'turn']);
  expect(holds).toEqual({ taken: 1, released: 1 });
  expect(pool.count).toBe(1);
});

test('a codec without prepare gets its encoder made and parked; a full budget throws and holds nothing', async () => {
  const { pool, object } = pooledObject();
  await prepareObject(object, rlncCodec, LAYOUT, () => Promise.resolve());
  expect(pool.count).toBe(1);

  const full = pooledObject(16);
  await expect(prepareObject(full.object, rlncCodec, LAYOUT, () => Promise.resolve())).rejects.toBeInstanceOf(
    EncoderBudgetError,
  );
  expect(full.holds).toEqual({ taken: 1, released: 1 });
  expect(full.budget.used).toBe(0);
  expect(full.pool.count).toBe(0);
});
