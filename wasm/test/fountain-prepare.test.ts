/**
 * A fountain encoder prepared ahead (a staged object, shared/src/endpoint/prepare.ts) solves each
 * source block's code before the first packet, through the recycling wrapper the proxy uses, and
 * encodes exactly what an unprepared one does.
 */
import { Layout } from '@mutp/shared';
import { fountainCodec } from '../src/fountain';
import { loadNodeCodecs, loadWirehairNode } from '../src/node';

const SYMBOL = 64;
/** Two source blocks (16,384 symbols each at most) and a third of one symbol, which has no code. */
const OBJECT_BYTES = 2 * 16384 * SYMBOL + 10;

function object(n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) bytes[i] = (i * 37 + 11) & 0xff;
  return bytes;
}

test('prepare builds every source block before the first packet and changes no packet', async () => {
  const wirehair = await loadWirehairNode();
  const codec = fountainCodec(wirehair);
  const bytes = object(OBJECT_BYTES);
  const layout = new Layout('fountain', bytes.length, SYMBOL, 1);
  expect(layout.unitCount).toBe(3);

  const prepared = codec.createEncoder(bytes, layout);
  expect(wirehair.liveCodecs()).toBe(0);
  for (let unit = 0; unit < layout.unitCount; unit++) prepared.prepare!(unit);
  // One solved code per block of two symbols or more; preparing again builds nothing more.
  expect(wirehair.liveCodecs()).toBe(2);
  prepared.prepare!(0);
  expect(wirehair.liveCodecs()).toBe(2);

  const lazy = codec.createEncoder(bytes, layout);
  const a = new Uint8Array(SYMBOL);
  const b = new Uint8Array(SYMBOL);
  for (let unit = 0; unit < layout.unitCount; unit++)
    for (const blockId of [0, 1, 16383, 16384, 20000, 123456]) {
      if (prepared.usableKey && !prepared.usableKey(unit, blockId)) continue;
      prepared.encodeInto(unit, blockId, a);
      lazy.encodeInto(unit, blockId, b);
      expect(a).toEqual(b);
    }
  // The prepared encoder built nothing while encoding; the lazy one built its two on first use.
  expect(wirehair.liveCodecs()).toBe(4);

  prepared.free();
  expect(() => prepared.prepare!(0)).toThrow(/after free/);
  lazy.free();
  expect(wirehair.liveCodecs()).toBe(0);
});

test("the proxy's recycling codecs pass prepare through; rlnc has nothing to prepare", async () => {
  const { fountain, rlnc } = await loadNodeCodecs();
  const bytes = object(4096);
  const f = fountain.createEncoder(bytes, new Layout('fountain', 4096, SYMBOL, 1));
  expect(typeof f.prepare).toBe('function');
  f.prepare!(0);
  f.free();
  const r = rlnc.createEncoder(bytes, new Layout('rlnc', 4096, SYMBOL, 8));
  expect(r.prepare).toBeUndefined();
  r.free();
});
