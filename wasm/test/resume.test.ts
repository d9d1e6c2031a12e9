/**
 * Resume across a lost connection (issue 12 item 4), on real Senders and a Receiver in the
 * in-memory network: a source that loses the transfer part-way (its connection went and its
 * endpoint dropped the transfer, as after a network change or a disconnection that outlived the
 * association) is asked again with the client's progress in the REQUEST (docs/protocol.md §4.1),
 * and the transfer it starts anew sends nothing the client had: no unit below the resume point,
 * and in fountain mode no block id the client received from that index. Any mode, any point of
 * the download, any source; the object is byte-exact.
 * It lives with the WebAssembly codecs because the fountain mode needs wirehair.
 */
import fc from 'fast-check';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { Codec, decode, MessageType, Mode, RequestMessage, RequestResume } from '@mutp/shared/internal';
import { asSource, download, honest, makeObject, NetworkHooks } from './helpers/in-memory-transfer';

let codecs: Record<Mode, Codec>;
beforeAll(async () => {
  codecs = await loadNodeCodecs();
});

interface Data {
  unit: number;
  /** Fountain block id; -1 in the other modes. */
  blockId: number;
}

function dataOf(bytes: Uint8Array | null): Data | undefined {
  const m = bytes && decode(bytes);
  if (!m || !m.ok) return undefined;
  const v = m.value;
  if (v.type === MessageType.DataUncoded) return { unit: v.index, blockId: -1 };
  if (v.type === MessageType.DataRlnc) return { unit: v.generation, blockId: -1 };
  if (v.type === MessageType.DataFountain) return { unit: v.block, blockId: v.blockId };
  return undefined;
}

interface Incarnation {
  source: number;
  resume?: RequestResume;
  /** DATA it sent. */
  sent: Data[];
}

/**
 * A download by three sources in which source `victim` loses the transfer once `cutAt` of the
 * DoF is in; `strip` takes the resume part out of the REQUESTs that reach the victim.
 */
function cutDownload(mode: Mode, victim: number, cutAt: number, seed: number, strip = false) {
  const object = makeObject(30_000 + seed, seed);
  const incarnations: Incarnation[] = [];
  /** What the client received from the victim, as unit/blockId. */
  const received = new Set<string>();
  let receivedAtCut = new Set<string>();
  let cut = false;
  const hooks: NetworkHooks = {
    step(now, control) {
      const { dof, totalDof } = control.receiver.progress();
      if (cut || totalDof === 0 || dof < cutAt * totalDof) return;
      cut = true;
      receivedAtCut = new Set(received);
      control.restart(victim, now);
    },
    delivered(from, bytes) {
      const d = from === victim ? dataOf(bytes) : undefined;
      if (d) received.add(`${d.unit}/${d.blockId}`);
    },
  };
  const make = (request: RequestMessage, i: number) => {
    const { resume, ...plain } = request;
    const seen: Incarnation = { source: i, ...(resume ? { resume } : {}), sent: [] };
    incarnations.push(seen);
    const asked = strip && i === victim ? plain : request;
    const source = asSource(honest(codecs[mode], object, asked, seed * 31 + incarnations.length));
    return {
      ...source,
      poll(now: number) {
        const bytes = source.poll(now);
        const d = dataOf(bytes);
        if (d) seen.sent.push(d);
        return bytes;
      },
    };
  };
  const run = download(mode, codecs[mode], object, make, [3, 7, 12], hooks);
  const own = incarnations.filter((x) => x.source === victim);
  return { run, object, own, receivedAtCut, cut };
}

const MODES: Mode[] = ['uncoded', 'rlnc', 'fountain'];

test.each(MODES)('%s: the source that starts over sends nothing the client had (any cut point, any source)', (mode) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 2 }),
      fc.double({ min: 0.05, max: 0.9, noNaN: true }),
      fc.integer({ min: 1, max: 1000 }),
      (victim, cutAt, seed) => {
        const { run, object, own, receivedAtCut, cut } = cutDownload(mode, victim, cutAt, seed);
        expect(cut).toBe(true);
        expect(run.receiver.status).toBe('complete');
        expect(Buffer.from(run.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
        expect(own).toHaveLength(2);
        const [first, again] = own;
        expect(first.resume).toBeUndefined();
        // Nothing below the resume point came again (no part: nothing was complete yet).
        const fromUnit = again.resume?.fromUnit ?? 0;
        expect(again.sent.filter((d) => d.unit < fromUnit)).toEqual([]);
        if (mode === 'fountain') {
          // Nothing received from it yet (its first DATA was in flight): nothing to skip.
          if (receivedAtCut.size > 0) expect(again.resume?.blockRound).toBeGreaterThan(0);
          expect(again.sent.filter((d) => receivedAtCut.has(`${d.unit}/${d.blockId}`))).toEqual([]);
        }
      },
    ),
    { numRuns: 12, seed: 12 },
  );
});

test('fountain: without the resume part, the source that starts over repeats block ids the client has (why it exists)', () => {
  const { run, own, receivedAtCut } = cutDownload('fountain', 0, 0.5, 7, true);
  expect(run.receiver.status).toBe('complete');
  expect(own[1].resume).toBeDefined();
  const repeated = own[1].sent.filter((d) => receivedAtCut.has(`${d.unit}/${d.blockId}`));
  expect(repeated.length).toBeGreaterThan(10);
});
