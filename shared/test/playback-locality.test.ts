/**
 * Locality for a segment series (issue 34): origo offers proxies by the client's address, so after
 * a network change a PlaybackSession asks origo for its set again at the next segment boundary and
 * hands the proxies origo no longer offers (the old region's) over to the ones it offers now, the
 * next segment staged at them first. Without a change the set stays, at no origo request per
 * segment. Against the fake host of client-orchestration.test.ts (fake time, real MutpClient and
 * SourceEndpoints behind fake WebRTC peers), whose scripted origo offers its proxies in list order:
 * the test puts region b's first when the client moves there, as origo's region rule would.
 */
import { Codec, Mode, rlncCodec, uncodedCodec } from '../src/internal';
import { ClientError, MutpClient, PlaybackSession, PlaybackOptions } from '../src/client';
import type { PlaybackClient } from '../src/client';
import { REPLACEMENT_BACKOFF_MS } from '../src/client/staging/stager';
import { FakeHost, FakeProxy, objectOf, proxy, settle } from './helpers/fake-host';
import { downloadedFrom } from './helpers/scripted-client';

const codecs = { rlnc: rlncCodec, uncoded: uncodedCodec, fountain: rlncCodec } as unknown as Record<Mode, Codec>;
const SEGMENTS = Array.from({ length: 6 }, (_, i) => ({ url: `https://media.example/seg-${i}.m4s` }));
const REGION_A = ['a1', 'a2'];
const REGION_B = ['b1', 'b2'];

function setup() {
  const host = new FakeHost({ proxies: [...REGION_A, ...REGION_B].map((id) => proxy(id)) });
  SEGMENTS.forEach((s, i) => host.objects.set(s.url, objectOf(20_000, i + 1)));
  const client = new MutpClient(host, {
    origoUrl: 'wss://origo.example/v1/client',
    codecs,
    symbolSize: 512,
    generationSize: 8,
  });
  return { host, client };
}

/** The client moves to region b: origo now offers b's proxies first, and the host's network changes. */
function moveToB(host: FakeHost): void {
  const inB = (p: FakeProxy) => (REGION_B.includes(p.info.proxyId) ? 0 : 1);
  host.script.proxies.sort((x, y) => inB(x) - inB(y));
  host.changeNetwork();
}

const proxyRequests = (host: FakeHost) => host.origoHeard.filter((m) => m.type === 'request-proxies').length;

/** Fetches every segment in order, calling `during(index)` once as each has decoded something; the sources of each. */
async function series(
  host: FakeHost,
  playback: PlaybackSession,
  during: (index: number) => void = () => undefined,
): Promise<string[][]> {
  const sources: string[][] = [];
  for (const [index, segment] of SEGMENTS.entries()) {
    let told = false;
    const { result } = await settle(
      host.clock,
      playback.fetch(segment, {
        upcoming: SEGMENTS.slice(index + 1),
        onProgress: (p) => {
          if (told || p.dof === 0) return;
          told = true;
          during(index);
        },
      }),
    );
    expect(Buffer.from(result.object).equals(Buffer.from(host.objects.get(segment.url)!))).toBe(true);
    sources.push(result.sources.map((s) => s.proxyId).sort());
  }
  return sources;
}

describe.each([
  ["the handoff before the next segment (a series, 'mutp playlist')", { handoff: 'before-next' }],
  ["the handoff in the background (the extension's loader)", { handoff: 'background' }],
] as const)('%s', (_name, handoff) => {
  const options: PlaybackOptions = { mode: 'rlnc', proxies: 2, staging: false, ...handoff };

  test("after a move during a segment, the segment after the next comes from the new region's proxies", async () => {
    const { host, client } = setup();
    const playback = new PlaybackSession(client, host.clock, options);
    const MOVE_DURING = 2;
    const sources = await series(host, playback, (index) => {
      if (index === MOVE_DURING) moveToB(host);
    });
    expect(client.networkChanges()).toBe(1);
    // Before the move, and the segment it interrupted (it resumes on its links): region a.
    for (let i = 0; i <= MOVE_DURING; i++) expect([i, sources[i]]).toEqual([i, REGION_A]);
    // The segment after the next, and every later one: region b's.
    for (let i = MOVE_DURING + 2; i < SEGMENTS.length; i++) expect([i, sources[i]]).toEqual([i, REGION_B]);
    expect(playback.stats()).toMatchObject({ handoffs: 1, relocatedReplaced: 2 });
    // The first choice, and one more after the move.
    expect(proxyRequests(host)).toBe(2);
    playback.close();
    client.close();
  });

  test('without a network change the set stays, and origo is asked for it once', async () => {
    const { host, client } = setup();
    const playback = new PlaybackSession(client, host.clock, options);
    const sources = await series(host, playback);
    for (const [i, s] of sources.entries()) expect([i, s]).toEqual([i, REGION_A]);
    expect(proxyRequests(host)).toBe(1);
    expect(playback.stats()).toMatchObject({ handoffs: 0, relocatedReplaced: 0 });
    playback.close();
    client.close();
  });
});

test('a network change that keeps the client in its region: origo is asked once more, the set stays', async () => {
  const { host, client } = setup();
  const playback = new PlaybackSession(client, host.clock, { mode: 'rlnc', proxies: 2, staging: false });
  const sources = await series(host, playback, (index) => {
    if (index === 1) host.changeNetwork();
  });
  for (const [i, s] of sources.entries()) expect([i, s]).toEqual([i, REGION_A]);
  expect(proxyRequests(host)).toBe(2);
  expect(playback.stats()).toMatchObject({ handoffs: 0, relocatedReplaced: 0 });
  playback.close();
  client.close();
});

test('with staging, the next segment is staged at the new proxies before the switch', async () => {
  const { host, client } = setup();
  const playback = new PlaybackSession(client, host.clock, { mode: 'rlnc', proxies: 2, staging: true });
  const MOVE_DURING = 1;
  const sources = await series(host, playback, (index) => {
    if (index === MOVE_DURING) moveToB(host);
  });
  for (let i = MOVE_DURING + 2; i < SEGMENTS.length; i++) expect([i, sources[i]]).toEqual([i, REGION_B]);
  const hints = host.origoHeard.filter((m) => m.type === 'stage');
  const toB = hints.filter((m) => JSON.stringify(m).includes('"b1"'));
  expect(toB.length).toBeGreaterThan(0);
  playback.close();
  client.close();
});

test('a move between two segments, origo not reconnected yet at the boundary: no request then, the segment after the next moves', async () => {
  const { host, client } = setup();
  const playback = new PlaybackSession(client, host.clock, { mode: 'rlnc', proxies: 2, staging: false });
  const sources: string[][] = [];
  for (const [index, segment] of SEGMENTS.entries()) {
    const { result } = await settle(host.clock, playback.fetch(segment));
    sources.push(result.sources.map((s) => s.proxyId).sort());
    if (index === 1) {
      moveToB(host);
      // The session to origo was let go with the old address: it is away until a download reopens it.
      expect(client.origoAway()).toBe(true);
    }
  }
  expect(sources.slice(0, 3)).toEqual([REGION_A, REGION_A, REGION_A]);
  expect(sources.slice(3)).toEqual([REGION_B, REGION_B, REGION_B]);
  expect(proxyRequests(host)).toBe(2);
  playback.close();
  client.close();
});

test('origo does not answer after a move: asked again only after the back-off, never once per segment', async () => {
  // A scripted client (as in playback-session.test.ts): origo's session is open but every request fails.
  let now = 0;
  let changes = 0;
  let asked = 0;
  const set = REGION_A.map((id) => proxy(id).info);
  const client: PlaybackClient = {
    chooseProxies() {
      asked++;
      return asked === 1 ? Promise.resolve(set) : Promise.reject(new ClientError('origo-unreachable', 'no answer'));
    },
    stage: () => Promise.resolve([]),
    networkChanges: () => changes,
    get: (url, o) => {
      now += 1000; // a segment a second
      return Promise.resolve(
        downloadedFrom(
          url,
          (o.use ?? []).map((p) => ({ proxyId: p.proxyId, name: p.name, bytes: 1, share: 0.5 })),
        ),
      );
    },
  };
  const clock = { now: () => now, setTimer: () => () => undefined };
  const playback = new PlaybackSession(client, clock, { mode: 'rlnc', proxies: 2, staging: false });
  const segments = Array.from({ length: 12 }, (_, i) => ({ url: `https://media.example/s${i}` }));
  for (const [index, segment] of segments.entries()) {
    if (index === 1) changes++;
    const { use } = await playback.fetch(segment);
    expect(use.map((p) => p.proxyId)).toEqual(REGION_A);
  }
  // The first choice; after the change at the boundary before segment 1, 5 s later (before
  // segment 6), and not before 10 s more (past the last): 3 requests, not one per segment.
  expect(REPLACEMENT_BACKOFF_MS).toBe(5000);
  expect(asked).toBe(3);
  playback.close();
});
