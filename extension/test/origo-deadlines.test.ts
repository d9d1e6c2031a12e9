/**
 * The downloader's limits derived from the hook's deadline, origo's back-off, and how the
 * downloader uses both: requests during a back-off are answered at once with the cause, the
 * client gets the derived limits, and a download with no byte in time stops before the hook's
 * deadline with its own reason.
 */
import { ClientError, GetOptions, GetResult, OrigoBackoff, OrigoDown } from '@mutp/shared/client';
import { hookDeadline, limitsFor, MIN_DEADLINE_MS, ORIGO_MAX_MS, origoCause } from '../src/common/deadlines';
import { ClientLike, Downloader } from '../src/downloader/downloader';
import { GetFailure, GetRequest, SegmentRecord } from '../src/common/messages';
import { normalizeSettings } from '../src/common/settings';

describe('limits derived from the deadline', () => {
  test.each([500, 5000, 8000, 10_000, 120_000])('deadline %i ms: every stage gives up before the hook', (d) => {
    const l = limitsFor(d);
    // A cold start runs origo (welcome, then the proxy request) and the proxy connections in turn.
    expect(2 * l.origoMs + l.proxyConnectMs).toBeLessThanOrEqual(l.firstByteMs);
    expect(l.firstByteMs).toBeLessThan(d);
    expect(l.origoMs).toBeGreaterThan(0);
  });

  test('they scale with the deadline, not with constants', () => {
    expect(limitsFor(5000)).toEqual({ origoMs: 1000, proxyConnectMs: 1750, firstByteMs: 4000 });
    expect(limitsFor(2000)).toEqual({ origoMs: 400, proxyConnectMs: 700, firstByteMs: 1600 });
    // origo's share is capped: a hung origo costs a start-up at most ORIGO_MAX_MS.
    expect(limitsFor(10_000)).toEqual({ origoMs: ORIGO_MAX_MS, proxyConnectMs: 3500, firstByteMs: 8000 });
    expect(limitsFor(Number.NaN)).toEqual(limitsFor(10_000));
  });

  test("the hook's deadline: 2x the segment duration within [MIN_DEADLINE_MS, configured]", () => {
    expect(hookDeadline(10_000, undefined)).toBe(10_000);
    expect(hookDeadline(10_000, 4)).toBe(8000);
    expect(hookDeadline(10_000, 1)).toBe(MIN_DEADLINE_MS);
    expect(hookDeadline(6000, 10)).toBe(6000);
  });

  test('causes named from client errors', () => {
    const cause = (e: ClientError) => origoCause(e.code, e.message);
    expect(cause(new ClientError('origo-unreachable', 'ws://x: handshake timed out (no WebSocket ...)'))).toBe(
      'handshake-timeout',
    );
    expect(cause(new ClientError('origo-unreachable', 'ws://x: connection refused or failed (1006)'))).toBe('refused');
    expect(cause(new ClientError('origo-unreachable', 'ws://x: closed before the welcome (1011)'))).toBe(
      'closed-before-welcome',
    );
    expect(cause(new ClientError('origo-unreachable', 'no welcome from ws://x within 1000 ms'))).toBe('no-welcome');
    expect(cause(new ClientError('origo-down', 'origo-down (back-off 2 s, 1.5 s left): ...'))).toBe('origo-down');
    expect(cause(new ClientError('no-proxies', 'none'))).toBeUndefined();
  });
});

describe('OrigoBackoff', () => {
  test('doubles from the first period up to the maximum; a success resets it', () => {
    let now = 0;
    const b = new OrigoBackoff({ firstMs: 2000, maxMs: 60_000 }, { now: () => now });
    expect(b.down()).toBeUndefined();
    const periods: number[] = [];
    for (let i = 0; i < 7; i++) {
      b.failed('handshake timed out');
      const down = b.down()!;
      periods.push(down.periodMs);
      expect(down).toMatchObject({ remainingMs: down.periodMs, cause: 'handshake timed out', failures: i + 1 });
      now += down.periodMs - 1;
      expect(b.down()?.remainingMs).toBe(1);
      now += 1;
      expect(b.down()).toBeUndefined(); // the period is over: one attempt may be made
    }
    expect(periods).toEqual([2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000]);
    b.succeeded();
    b.failed('refused');
    expect(b.down()?.periodMs).toBe(2000);
  });
});

// ---------------------------------------------------------------- the downloader

interface Call {
  options: GetOptions;
  resolve(r: GetResult): void;
  reject(e: Error): void;
}

/** A client whose downloads the test settles, with a back-off the test sets. */
class FakeClient implements ClientLike {
  calls: Call[] = [];
  down?: OrigoDown;
  get(_url: string, options: GetOptions): Promise<GetResult> {
    return new Promise((resolve, reject) => {
      options.signal?.addEventListener('abort', () => reject(new ClientError('cancelled', 'aborted')));
      this.calls.push({ options, resolve, reject });
    });
  }
  close(): void {}
  origoDown(): OrigoDown | undefined {
    return this.down;
  }
}

function setup(deadlineMs = 10_000) {
  const settings = normalizeSettings({ deadlineMs, concurrency: 4 });
  const client = new FakeClient();
  const records: SegmentRecord[] = [];
  const timers: { ms: number; fire: () => void; cancelled: boolean }[] = [];
  const d = new Downloader({
    settings: () => settings,
    createClient: () => Promise.resolve(client),
    now: () => 0,
    setTimer: (ms, fire) => {
      const t = { ms, fire, cancelled: false };
      timers.push(t);
      return () => (t.cancelled = true);
    },
    onRecord: (r) => records.push(r),
  });
  return { d, client, records, timers };
}

let nextId = 1;
const req = (more: Partial<GetRequest> = {}): GetRequest => ({
  type: 'get',
  id: nextId++,
  url: `https://cdn.example/seg-${nextId}.m4s`,
  mode: 'rlnc',
  proxies: 2,
  ...more,
});
const flush = () => new Promise((r) => setImmediate(r));

test("the client gets the limits of the request's deadline", async () => {
  const t = setup();
  void t.d.handle(req({ deadlineMs: 5000 }));
  await flush();
  expect(t.client.calls[0].options).toMatchObject({ origoTimeoutMs: 1000, connectTimeoutMs: 1750 });
  expect(t.timers.map((x) => x.ms)).toEqual([4000]);
  // Without a deadline in the request (an old content script), the configured one.
  void t.d.handle(req());
  await flush();
  expect(t.client.calls[1].options).toMatchObject({ origoTimeoutMs: 1000, connectTimeoutMs: 3500 });
});

test('during a back-off requests are answered at once with the cause, without asking the client', async () => {
  const t = setup();
  // The first request makes the client; origo then fails and the client is in back-off.
  const first = t.d.handle(req());
  await flush();
  t.client.calls[0].reject(
    new ClientError('origo-unreachable', 'ws://127.0.0.1:1/v1/client: handshake timed out (no WebSocket ...)'),
  );
  expect(await first).toMatchObject({ ok: false, reason: 'origo-unreachable', cause: 'handshake-timeout' });
  t.client.down = { remainingMs: 1500, periodMs: 2000, failures: 1, cause: 'handshake timed out' };
  const answer = (await t.d.handle(req())) as GetFailure;
  expect(answer).toMatchObject({ ok: false, reason: 'origo-unreachable', cause: 'origo-down' });
  expect(answer.message).toMatch(/^origo-down \(back-off 2 s, 1.5 s left\): handshake timed out/);
  expect(t.client.calls).toHaveLength(1);
  expect(t.records.map((r) => r.detail)).toEqual([
    'origo-unreachable: ws://127.0.0.1:1/v1/client: handshake timed out (no WebSocket ...)',
    answer.message,
  ]);
  // The period is over: the next request goes to the client again.
  t.client.down = undefined;
  void t.d.handle(req());
  await flush();
  expect(t.client.calls).toHaveLength(2);
});

test("a download with no byte by the first-byte limit stops with 'no-first-byte'; progress clears the limit", async () => {
  const t = setup();
  const slow = t.d.handle(req({ deadlineMs: 5000 }));
  const moving = t.d.handle(req({ deadlineMs: 5000 }));
  await flush();
  t.client.calls[1].options.onProgress?.({ dof: 1, totalDof: 10, bytes: 100, liveSources: 2, sources: 2 });
  expect(t.timers.map((x) => x.cancelled)).toEqual([false, true]);
  t.timers[0].fire();
  expect(await slow).toMatchObject({ ok: false, reason: 'no-first-byte' });
  expect(t.client.calls[0].options.signal?.aborted).toBe(true);
  expect(t.client.calls[1].options.signal?.aborted).toBe(false);
  t.d.cancel(nextId - 1);
  expect(await moving).toBeUndefined();
});

test('a request the page cancelled still leaves origo marked down for a client without its own back-off', async () => {
  const settings = normalizeSettings({});
  const calls: Call[] = [];
  const client: ClientLike = {
    get: (_u, options) => new Promise((resolve, reject) => calls.push({ options, resolve, reject })),
    close: () => undefined,
  };
  const d = new Downloader({ settings: () => settings, createClient: async () => client, now: () => 0 });
  const r = req();
  const pending = d.handle(r);
  await flush();
  d.cancel(r.id);
  calls[0].reject(new ClientError('origo-unreachable', 'connection refused or failed (1006)'));
  expect(await pending).toBeUndefined();
  expect(await d.handle(req())).toMatchObject({ ok: false, reason: 'origo-unreachable', cause: 'origo-down' });
  expect(calls).toHaveLength(1);
});
