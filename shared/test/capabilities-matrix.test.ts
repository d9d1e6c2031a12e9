/**
 * The mixed-fleet matrix (issue 34): for each optional feature, proxies with it switched off,
 * the client with it switched off, both, and a fleet where only some proxies have it. Each cell
 * is a real download: the client orchestration's runDownload over ProxyLinks whose transports
 * reach real SourceEndpoints (the proxy's side of the core), on fake time. Every cell passes
 * byte-exact, or, where the request cannot be served without the feature (a range, a proxy whose
 * key the client holds but that does not sign), fails at once with a reason naming it. A side
 * with a feature switched off drops any datagram that uses it, as the release before it would,
 * so a cell that sent one would show up as malformed datagrams and lost sources.
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import { sha256 } from '@noble/hashes/sha256';
import {
  Admission,
  DeadlineTimer,
  decode,
  ErrorCode,
  Feature,
  FEATURES,
  LayoutDigests,
  Message,
  MessageType,
  MetaSigner,
  ProxyInfo,
  rlncCodec,
  SharedEncoders,
  SourceEndpoint,
  SourceObject,
  uncodedCodec,
} from '../src/internal';
import { ClientError, ProxyLink, runDownload } from '../src/client';
import type { DownloadOptions, DownloadResult, LinkTransport } from '../src/client';
import { FakeClock, objectOf, settle } from './helpers/fake-host';

const URL_ = 'https://cdn.example/seg-1.m4s';
const FILE = objectOf(160_000, 34);
const CONTENT_TYPE = 'video/mp4';
const RANGE = { start: 5_000, length: 120_000 };
const PROXIES = 3;
/** How long a slow proxy's origin fetch takes (the fetching cells): it answers repeated REQUESTs meanwhile. */
const SLOW_FETCH_MS = 300;

/** One proxy of the fleet: its features, key and what it received (decoded, on the wire). */
interface FleetProxy {
  info: ProxyInfo;
  disabled: Feature[];
  /** Serves other bytes under the honest identity (a polluter). */
  polluter?: boolean;
  /** Its origin fetch takes this long (ms); at once without. */
  fetchMs?: number;
  signer: MetaSigner;
  /** Every SourceEndpoint it ran (a new one after each reconnection: the transfer is lost). */
  endpoints: SourceEndpoint[];
  received: Message[];
}

function keyedProxy(i: number, disabled: Feature[]): FleetProxy {
  const pair = generateKeyPairSync('ed25519');
  const x = pair.publicKey.export({ format: 'jwk' }).x as string;
  const proxyId = `edge-${i}`;
  return {
    info: {
      proxyId,
      name: proxyId,
      httpUrl: `http://10.0.0.${i + 1}:8080`,
      capacityBps: 1_000_000 * (i + 1),
      assertionKey: x,
      capabilities: SourceEndpoint.declaredFeatures(disabled),
    },
    disabled,
    signer: { proxyId, sign: (m) => new Uint8Array(sign(null, m, pair.privateKey)) },
    endpoints: [],
    received: [],
  };
}

/** FILE with a byte changed every 7,000: what a polluter sends under FILE's identity. */
const POLLUTED = FILE.map((b, i) => (i % 7000 === 3500 ? b ^ 0x5a : b));

/** What the proxy's cache hands the endpoint: the bytes asked for, as an origin with ranges serves them. */
function serve(
  admission: Admission,
  range: { start: number; length: number } | undefined,
  polluter = false,
): SourceObject | number {
  if (range && range.start >= FILE.length) return ErrorCode.RangeNotSatisfiable;
  const cut = (file: Uint8Array) =>
    range ? file.subarray(range.start, Math.min(file.length, range.start + range.length)) : file;
  const bytes = cut(FILE);
  const sent = polluter ? cut(POLLUTED) : bytes;
  return {
    bytes: sent,
    digest: sha256(bytes),
    // The honest unit digests: its META states the honest identity, its data is not it.
    digests: new LayoutDigests(bytes),
    encoders: new SharedEncoders(sent, admission.memory),
    cached: true,
    contentType: CONTENT_TYPE,
    ...(range ? { range: { start: range.start, completeLength: FILE.length } } : {}),
  };
}

/** A link transport whose far end is a real SourceEndpoint of `proxy`; one way 1 ms, paced 64 datagrams per ms. */
class EndpointTransport implements LinkTransport {
  readonly kind = 'test';
  isOpen = true;
  onDatagram?: (bytes: Uint8Array) => void;
  onClose?: (reason: string) => void;
  private readonly endpoint: SourceEndpoint;
  private readonly timer: DeadlineTimer;
  private readonly admission = new Admission({ maxTransfers: 16, maxPerClient: 8, memoryBytes: 64 << 20 });

  constructor(
    private readonly clock: FakeClock,
    private readonly proxy: FleetProxy,
  ) {
    this.endpoint = new SourceEndpoint({
      clientKey: 'client-1',
      codecs: { rlnc: rlncCodec, uncoded: uncodedCodec },
      admission: this.admission,
      seed: () => 7,
      now: clock.now(),
      signer: proxy.signer,
      disabledFeatures: proxy.disabled,
    });
    proxy.endpoints.push(this.endpoint);
    this.timer = new DeadlineTimer(
      this.endpoint,
      (at, fire) => clock.setTimer(at - clock.now(), fire),
      () => clock.now(),
      () => this.flush(),
    );
  }

  send(bytes: Uint8Array): boolean {
    if (!this.isOpen) return false;
    const m = decode(bytes);
    if (m.ok) this.proxy.received.push(m.value);
    this.clock.setTimer(1, () => {
      if (!this.isOpen) return;
      this.endpoint.handleDatagram(bytes, this.clock.now());
      this.flush();
    });
    return true;
  }

  close(): void {
    this.isOpen = false;
    this.timer.stop();
  }

  /** The network drops the connection under the link (its transfer is lost with the endpoint). */
  drop(): void {
    this.close();
    this.onClose?.('connection reset');
  }

  private deliver(bytes: Uint8Array): void {
    this.clock.setTimer(1, () => this.isOpen && this.onDatagram?.(bytes));
  }

  private flush(): void {
    if (!this.isOpen) return;
    const now = this.clock.now();
    for (let e = this.endpoint.pollEvent(); e; e = this.endpoint.pollEvent()) {
      if (e.type !== 'fetch') continue;
      const served = serve(this.admission, e.range, this.proxy.polluter);
      const answer = (at: number) => {
        if (typeof served === 'number') this.endpoint.objectFailed(e.transferId, served, 'range not satisfiable', at);
        else this.endpoint.objectReady(e.transferId, served, at);
      };
      const fetchMs = this.proxy.fetchMs;
      if (fetchMs === undefined) answer(now);
      else
        this.clock.setTimer(fetchMs, () => {
          if (!this.isOpen) return;
          answer(this.clock.now());
          this.flush();
        });
    }
    for (let c = this.endpoint.pollControl(); c; c = this.endpoint.pollControl()) this.deliver(c);
    for (let i = 0; i < 64; i++) {
      const d = this.endpoint.pollDatagram(now);
      if (!d) break;
      this.deliver(d);
      if (i === 63) this.clock.setTimer(1, () => this.flush());
    }
    this.timer.arm();
  }
}

interface Cell {
  /** Per proxy, the features it has switched off. */
  proxyDisabled: Feature[][];
  clientDisabled: Feature[];
  range?: { start: number; length: number };
  mode?: 'rlnc' | 'uncoded' | 'fountain';
  /** Drop proxy 0's connection once this share of the object is decoded (it reconnects, its transfer lost). */
  dropAt?: number;
  /** Proxies that pollute (by index). */
  polluters?: number[];
  /** Proxies whose origin fetch takes SLOW_FETCH_MS (by index). */
  slowFetch?: number[];
}

interface Outcome {
  result?: DownloadResult;
  error?: ClientError;
  fleet: FleetProxy[];
}

async function download(cell: Cell): Promise<Outcome> {
  const clock = new FakeClock();
  const fleet = cell.proxyDisabled.map((disabled, i) => ({
    ...keyedProxy(i, disabled),
    polluter: cell.polluters?.includes(i) ?? false,
    ...(cell.slowFetch?.includes(i) ? { fetchMs: SLOW_FETCH_MS } : {}),
  }));
  const transports = new Map<FleetProxy, EndpointTransport>();
  const connector = (proxy: FleetProxy) => () => {
    const t = new EndpointTransport(clock, proxy);
    transports.set(proxy, t);
    return Promise.resolve<LinkTransport>(t);
  };
  const links = fleet.map(
    (proxy) => new ProxyLink(proxy.info, { clock, reconnect: connector(proxy), reconnectAttemptMs: 1000 }),
  );
  await Promise.all(links.map((link, i) => link.connect(connector(fleet[i]), 1000)));
  let dropped = false;
  const mode = cell.mode ?? 'rlnc';
  const options: DownloadOptions = {
    url: URL_,
    mode,
    // A small window for a reconnection: the client's wMin moves, so a resume part says something.
    window: cell.dropAt === undefined ? 240 : 48,
    // In uncoded mode too: a check unit of 24 symbols holds several sources' packets.
    generationSize: 24,
    symbolSize: 1120,
    codec: mode === 'rlnc' ? rlncCodec : uncodedCodec,
    transferId: 77,
    ...(cell.range ? { range: cell.range } : {}),
    disabledFeatures: cell.clientDisabled,
    onProgress: (p) => {
      if (cell.dropAt === undefined || dropped || p.totalDof === 0 || p.dof < cell.dropAt * p.totalDof) return;
      dropped = true;
      transports.get(fleet[0])?.drop();
    },
  };
  try {
    const result = await settle(clock, runDownload(links, clock, options), 60_000);
    return { result, fleet };
  } catch (e) {
    if (e instanceof ClientError) return { error: e, fleet };
    throw e;
  } finally {
    links.forEach((link) => link.close());
  }
}

const requests = (p: FleetProxy) =>
  p.received.filter((m): m is Extract<Message, { type: typeof MessageType.Request }> => m.type === MessageType.Request);

/** What no proxy of the cell may have received: a feature it has switched off. */
function sentAnUnknownFeature(p: FleetProxy): string | undefined {
  const off = new Set(p.disabled);
  for (const r of requests(p)) {
    if (off.has('ranges') && r.range) return 'a range';
    if (off.has('weights') && r.weights) return 'initial weights';
    if (off.has('resume') && r.resume) return 'a resume part';
    if (off.has('extensions') && r.extensions) return 'an extension block';
    if (off.has('partitioned') && r.scheduler === 'partitioned') return 'the partitioned scheduler';
  }
  if (off.has('symbol-digests') && p.received.some((m) => m.type === MessageType.SymbolDigestsRequest))
    return 'a SYMBOL_DIGESTS_REQUEST';
  return undefined;
}

function expectByteExact(outcome: Outcome, range: { start: number; length: number } | undefined): DownloadResult {
  if (outcome.error) throw new Error(`download failed: ${outcome.error.message}`);
  const result = outcome.result!;
  const expected = range ? FILE.subarray(range.start, range.start + range.length) : FILE;
  expect(Buffer.from(result.object).equals(Buffer.from(expected))).toBe(true);
  // No proxy dropped anything as unreadable, and none sent the client anything it could not read.
  for (const p of outcome.fleet) {
    expect([p.info.name, sentAnUnknownFeature(p)]).toEqual([p.info.name, undefined]);
    expect([p.info.name, p.endpoints.reduce((n, ep) => n + ep.stats().malformed, 0)]).toEqual([p.info.name, 0]);
  }
  for (const s of result.sources) expect([s.name, s.malformed]).toEqual([s.name, 0]);
  return result;
}

const all = (features: Feature[]) => Array.from({ length: PROXIES }, () => features);
const half = (features: Feature[]) => Array.from({ length: PROXIES }, (_, i) => (i % 2 === 0 ? features : []));

/** The sides a feature is switched off on, for every feature. */
const SIDES = ['proxies', 'client', 'both', 'some proxies'] as const;
function cellFor(feature: Feature, side: (typeof SIDES)[number]): Cell {
  const off = [feature];
  const proxyDisabled =
    side === 'proxies' || side === 'both' ? all(off) : side === 'some proxies' ? half(off) : all([]);
  const clientDisabled = side === 'client' || side === 'both' ? off : [];
  // Each cell uses the feature: a range for ranges, a reconnection mid-transfer for resume,
  // uncoded mode (the symbol-digest path) for symbol-digests, a proxy whose origin fetch is slow for
  // fetching; weights, attributes, signatures,
  // partitioned and extensions are used by every download.
  return {
    proxyDisabled,
    clientDisabled,
    ...(feature === 'ranges' ? { range: RANGE } : {}),
    ...(feature === 'resume' ? { dropAt: 0.8 } : {}),
    ...(feature === 'symbol-digests' ? { mode: 'uncoded' as const } : {}),
    ...(feature === 'fetching' ? { slowFetch: [PROXIES - 1] } : {}),
  };
}

describe('mixed-fleet matrix: each optional feature switched off on each side', () => {
  test('the matrix covers every optional feature', () => {
    expect([...FEATURES].sort()).toEqual(
      [
        'attributes',
        'extensions',
        'fetching',
        'partitioned',
        'ranges',
        'resume',
        'signatures',
        'symbol-digests',
        'weights',
      ].sort(),
    );
  });

  test('with every feature on, the download uses each of them', async () => {
    const outcome = await download({ proxyDisabled: all([]), clientDisabled: [], range: RANGE, dropAt: 0.8 });
    const result = expectByteExact(outcome, RANGE);
    expect(result.attributes).toEqual({
      contentType: CONTENT_TYPE,
      range: { start: RANGE.start, completeLength: FILE.length },
    });
    const sent = outcome.fleet.flatMap(requests);
    expect(sent.every((r) => r.extensions && r.range && r.weights && r.scheduler === 'partitioned')).toBe(true);
    // Proxy 0 lost the transfer mid-way and was asked again with what the client had.
    expect(requests(outcome.fleet[0]).some((r) => r.resume && r.resume.fromUnit > 0)).toBe(true);
    expect(outcome.fleet[0].endpoints.length).toBe(2);
  });

  for (const feature of FEATURES) {
    for (const side of SIDES) {
      const cell = cellFor(feature, side);
      const servable =
        !(feature === 'ranges' && (side === 'proxies' || side === 'both' || side === 'client')) &&
        !(feature === 'signatures' && side === 'proxies');
      test(`${feature} off on ${side}: ${servable ? 'byte-exact' : 'refused with the reason'}`, async () => {
        const outcome = await download(cell);
        if (!servable) {
          expect(outcome.error?.code).toBe('no-proxies');
          expect(outcome.error?.message).toMatch(feature === 'ranges' ? /byte ranges/ : /signed METAs/);
          // Refused before any REQUEST: nothing was sent that a proxy could not read.
          expect(outcome.fleet.flatMap(requests)).toEqual([]);
          return;
        }
        const result = expectByteExact(outcome, cell.range);
        const fleet = outcome.fleet;
        const understands = (p: FleetProxy, f: Feature) => !p.disabled.includes(f) && !cell.clientDisabled.includes(f);
        // Whatever both sides have is still used where it is had.
        for (const p of fleet) {
          for (const r of requests(p)) {
            expect(Boolean(r.extensions)).toBe(understands(p, 'extensions'));
            expect(Boolean(r.weights)).toBe(understands(p, 'weights'));
            expect(r.scheduler).toBe(
              understands(p, 'partitioned') ? 'partitioned' : cell.mode === 'uncoded' ? 'random' : 'rarest',
            );
          }
        }
        if (feature === 'resume') {
          // Proxy 0 lost the transfer: a resume part only where both sides read it; a fresh REQUEST otherwise.
          const resumed = requests(fleet[0]).some((r) => r.resume);
          expect(resumed).toBe(understands(fleet[0], 'resume'));
          expect(fleet[0].endpoints.length).toBe(2);
        }
        if (feature === 'fetching') {
          // The slow proxy said it was fetching only where both sides read FETCHING.
          const slow = fleet[PROXIES - 1];
          const sent = slow.endpoints.reduce((n, ep) => n + ep.stats().fetchingSent, 0);
          expect(sent > 0).toBe(understands(slow, 'fetching'));
        }
        // Without attributes on every source no Content-Type can be agreed on: none is delivered
        // (the caller takes the type from elsewhere); the bytes are checked exactly as before.
        if (feature === 'attributes') expect(result.attributes?.contentType).toBeUndefined();
        if (feature === 'signatures' && side === 'some proxies') {
          // The client holds every proxy's key: the ones that do not sign were not used.
          expect(result.sources.map((s) => s.name)).toEqual(
            fleet.filter((p) => p.disabled.length === 0).map((p) => p.info.name),
          );
        }
      });
    }
  }
});

describe('symbol digests in a mixed fleet with a polluter (uncoded)', () => {
  const asks = (p: FleetProxy) => p.received.filter((m) => m.type === MessageType.SymbolDigestsRequest).length;

  test('every proxy reads the ask: the polluter is found by its symbol digests, the object is exact', async () => {
    const outcome = await download({ proxyDisabled: all([]), clientDisabled: [], mode: 'uncoded', polluters: [2] });
    const result = expectByteExact({ ...outcome, fleet: outcome.fleet.slice(0, 2) }, undefined);
    expect(result.sources[2].polluter).toBe(true);
    expect(outcome.fleet.map(asks).some((n) => n > 0)).toBe(true);
  });

  test('only the polluter reads the ask: the others are never asked, and the download fails cleanly (no unchecked unit)', async () => {
    const outcome = await download({
      proxyDisabled: [['symbol-digests'], ['symbol-digests'], []],
      clientDisabled: [],
      mode: 'uncoded',
      polluters: [2],
    });
    expect(asks(outcome.fleet[0]) + asks(outcome.fleet[1])).toBe(0);
    for (const p of outcome.fleet) expect(p.endpoints.reduce((n, ep) => n + ep.stats().malformed, 0)).toBe(0);
    // The failed unit waits for a source that can prove its packets; none can but the polluter, whose
    // answer does not hash to the agreed digest: the download ends in the stall timeout, as
    // docs/protocol.md §13 says, rather than take the unit unchecked.
    expect(outcome.result).toBeUndefined();
    expect(outcome.error?.message).toMatch(/stalled/);
  });

  test('a client without symbol digests asks nobody, and never delivers other bytes than the origin’s', async () => {
    const outcome = await download({
      proxyDisabled: all([]),
      clientDisabled: ['symbol-digests'],
      mode: 'uncoded',
      polluters: [2],
    });
    expect(outcome.fleet.map(asks)).toEqual([0, 0, 0]);
    // Either the polluter was found another way and the object is exact, or the download failed.
    if (outcome.result) expect(Buffer.from(outcome.result.object).equals(Buffer.from(FILE))).toBe(true);
    else expect(outcome.error?.code).toBe('download-failed');
  });
});

test('fountain needs the partitioned scheduler: proxies without it are left out, none left is a clear refusal', async () => {
  // Refused before any codec runs or REQUEST goes out (the rlnc codec here is never used).
  const outcome = await download({ proxyDisabled: all(['partitioned']), clientDisabled: [], mode: 'fountain' });
  expect(outcome.error?.code).toBe('no-proxies');
  expect(outcome.error?.message).toMatch(/edge-0 does not declare the partitioned scheduler fountain needs/);
  expect(outcome.fleet.flatMap(requests)).toEqual([]);
});
