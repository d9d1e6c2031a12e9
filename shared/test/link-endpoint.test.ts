/**
 * The client's link endpoint, sans-IO: routing by transfer id after one decode, connection-level
 * ERRORs, liveness judged once per link, and reconnection owned by the endpoint (the host only
 * opens transports when asked). Time is a number the tests move.
 */
import fc from 'fast-check';
import {
  CONNECTION_TRANSFER_ID,
  encodeDataUncoded,
  encodeError,
  encodeStop,
  ErrorCode,
  judgeLiveness,
  LinkEndpoint,
  LinkEvent,
  LinkTransfer,
  Message,
  StopReason,
} from '../src/internal';

class Transfer implements LinkTransfer {
  messages: Message[] = [];
  reconnects: number[] = [];
  closedWith?: string;
  waiting = true;
  handleMessage(m: Message): void {
    this.messages.push(m);
  }
  awaiting(): boolean {
    return this.waiting && this.closedWith === undefined;
  }
  reconnected(now: number): void {
    this.reconnects.push(now);
  }
  closed(reason: string): void {
    this.closedWith = reason;
  }
}

const data = (transferId: number, seq = 0) =>
  encodeDataUncoded({ transferId, seq, index: seq, payload: new Uint8Array(8).fill(seq) });
const stop = (transferId: number) => encodeStop({ transferId, reason: StopReason.Complete });

function events(link: LinkEndpoint): LinkEvent[] {
  const out: LinkEvent[] = [];
  for (let e = link.pollEvent(); e; e = link.pollEvent()) out.push(e);
  return out;
}

/** Runs the endpoint's timer from `from` to `to` as a host would: handleTimeout at each deadline. */
function advance(link: LinkEndpoint, from: number, to: number): number {
  let now = from;
  for (let guard = 0; guard < 10_000; guard++) {
    const d = link.nextDeadline();
    if (d === null || d > to) return to;
    now = Math.max(now, d);
    link.handleTimeout(now);
  }
  throw new Error('the endpoint kept asking for the same deadline');
}

function openLink(opts: ConstructorParameters<typeof LinkEndpoint>[0] = { now: 0 }) {
  const link = new LinkEndpoint(opts);
  link.transportOpened(opts.now);
  return link;
}

describe('routing', () => {
  test('each datagram reaches only its transfer, decoded once; strays and garbage are counted', () => {
    const link = openLink();
    const a = new Transfer();
    const b = new Transfer();
    link.attach(7, a, 0);
    link.attach(9, b, 0);
    link.handleDatagram(data(7, 1), 1);
    link.handleDatagram(data(9, 2), 2);
    link.handleDatagram(data(11, 3), 3);
    link.handleDatagram(new Uint8Array([1, 2, 3]), 4);
    expect(a.messages.map((m) => m.transferId)).toEqual([7]);
    expect(b.messages.map((m) => m.transferId)).toEqual([9]);
    expect(link.stats).toMatchObject({ received: 4, unrouted: 1, malformed: 1 });
  });

  test('a detached transfer hears nothing more', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    link.detach(7);
    link.handleDatagram(data(7), 1);
    expect(a.messages).toHaveLength(0);
  });

  test('GoingAway on the connection id: one going-away event, transfers go on', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    const away = encodeError({ transferId: CONNECTION_TRANSFER_ID, code: ErrorCode.GoingAway, message: 'draining' });
    link.handleDatagram(away, 1);
    link.handleDatagram(away, 2);
    link.handleDatagram(data(7), 3);
    expect(events(link)).toEqual([{ type: 'going-away', reason: 'draining' }]);
    expect(link.goingAway).toBe('draining');
    expect(a.messages).toHaveLength(1);
  });

  test('a GoingAway refusing one transfer marks the link and reaches that transfer', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    link.handleDatagram(encodeError({ transferId: 7, code: ErrorCode.GoingAway, message: '' }), 1);
    expect(events(link)).toEqual([{ type: 'going-away', reason: 'the proxy is going away' }]);
    expect(a.messages[0]).toMatchObject({ transferId: 7, code: ErrorCode.GoingAway });
  });

  test('sending: queued while open, dropped while not; the queue is bounded', () => {
    const link = new LinkEndpoint({ now: 0, maxQueuedDatagrams: 2 });
    expect(link.send(stop(1), 0)).toBe(false);
    link.transportOpened(0);
    for (let i = 1; i <= 3; i++) expect(link.send(stop(i), 0)).toBe(true);
    const sent = [link.pollTransmit(), link.pollTransmit(), link.pollTransmit()];
    expect(sent.map((d) => d && d[5])).toEqual([2, 3, null]);
    expect(link.stats).toMatchObject({ sent: 2, dropped: 2 });
  });
});

describe('liveness, once per link', () => {
  test('a streaming link silent for silentMs is dead: disconnect, then a connect attempt', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    link.send(stop(7), 0);
    link.handleDatagram(data(7), 100);
    advance(link, 100, 3000);
    expect(events(link)).toEqual([]);
    advance(link, 3000, 4200);
    expect(events(link)).toEqual([
      { type: 'disconnect', reason: 'nothing for 3000 ms' },
      { type: 'connect', attempt: 1, timeLeftMs: 15_000 },
    ]);
    expect(link.state).toBe('reconnecting');
  });

  test('another transfer still streaming keeps the link alive for one waiting on its origin fetch', () => {
    const link = openLink();
    const streaming = new Transfer();
    const fetching = new Transfer();
    link.attach(1, streaming, 0);
    link.attach(2, fetching, 0);
    link.send(stop(2), 0);
    let now = 0;
    for (let t = 100; t <= 20_000; t += 100) {
      now = advance(link, now, t);
      link.handleDatagram(data(1, t / 100), t);
    }
    expect(events(link)).toEqual([]);
    expect(link.state).toBe('open');
  });

  test('unanswered: a network probe after silentMs; a network that does not answer kills the link', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    link.send(stop(7), 500);
    // Looked at every silentMs / 3: the first look past 3 s of no answer is at 4 s.
    advance(link, 0, 3900);
    expect(events(link)).toEqual([]);
    advance(link, 3900, 4100);
    expect(events(link)).toEqual([{ type: 'probe-network' }]);
    link.networkAnswered(false, 4100);
    expect(events(link)).toEqual([
      { type: 'disconnect', reason: 'no answer for 3000 ms, and the network does not answer' },
      { type: 'connect', attempt: 1, timeLeftMs: 15_000 },
    ]);
  });

  test('unanswered with a network that answers: dead only after unansweredMs, probed once', () => {
    const link = openLink();
    link.attach(7, new Transfer(), 0);
    link.send(stop(7), 0);
    advance(link, 0, 4100);
    expect(events(link)).toEqual([{ type: 'probe-network' }]);
    link.networkAnswered(true, 4100);
    advance(link, 4100, 10_000);
    expect(events(link)).toEqual([]);
    advance(link, 10_000, 11_000);
    expect(events(link)[0]).toEqual({ type: 'disconnect', reason: 'no answer for 10000 ms' });
  });

  test('a link nobody waits on is never judged, and a dead one with no waiting transfer closes', () => {
    const link = openLink();
    const done = new Transfer();
    done.waiting = false;
    link.attach(7, done, 0);
    link.send(stop(7), 0);
    advance(link, 0, 60_000);
    expect(events(link)).toEqual([]);
    link.transportClosed('peer connection failed', 60_000);
    expect(events(link)).toEqual([{ type: 'closed', reason: 'peer connection failed' }]);
    expect(done.closedWith).toBe('peer connection failed');
  });

  test('property: heard within silentMs, or never asked, is always alive; random loss of datagrams cannot kill a streaming link', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 0, max: 2999 }),
        fc.boolean(),
        fc.option(fc.integer({ min: 0, max: 100_000 }), { nil: undefined }),
        (openedAt, sinceHeard, heard, firstSentAt) => {
          const lastHeardAt = openedAt + 10;
          const now = lastHeardAt + sinceHeard;
          const v = judgeLiveness(
            { silentMs: 3000, unansweredMs: 10_000 },
            [{ awaiting: true, heard, firstSentAt: heard ? firstSentAt : undefined }],
            openedAt,
            lastHeardAt,
            now,
          );
          expect(v.kind).toBe('alive');
        },
      ),
    );
  });
});

describe('reconnection, owned by the endpoint', () => {
  test('attempts back off 0.5, 1, 2, 2 s until the window is spent, then the link closes with both reasons', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    link.transportClosed('channel mutp-data closed', 1000);
    const attempts: number[] = [];
    let now = 1000;
    for (let guard = 0; guard < 20 && link.state === 'reconnecting'; guard++) {
      for (const e of events(link)) if (e.type === 'connect') attempts.push(now);
      link.transportFailed('no connection within 5000 ms', now);
      const next = link.nextDeadline();
      if (next === null) break;
      now = next;
      link.handleTimeout(now);
    }
    expect(attempts).toEqual([1000, 1500, 2500, 4500, 6500, 8500, 10_500, 12_500, 14_500]);
    expect(link.state).toBe('closed');
    expect(a.closedWith).toBe('channel mutp-data closed; reconnecting failed: no connection within 5000 ms');
  });

  test('a host-given retry time neither grows the back-off nor extends the window', () => {
    const link = openLink();
    link.attach(7, new Transfer(), 0);
    link.transportClosed('lost', 0);
    events(link);
    link.transportFailed('origo not reachable yet', 0, 250);
    expect(link.nextDeadline()).toBe(250);
    link.handleTimeout(250);
    events(link);
    link.transportFailed('timeout', 250);
    expect(link.nextDeadline()).toBe(750);
  });

  test('the new transport: transfers told to resume, liveness starts over, sends go through again', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    link.handleDatagram(data(7), 10);
    link.transportClosed('lost', 100);
    expect(link.send(stop(7), 150)).toBe(false);
    link.transportOpened(400);
    expect(a.reconnects).toEqual([400]);
    expect(link.stats).toMatchObject({ transportsLost: 1, reconnections: 1 });
    expect(link.send(stop(7), 400)).toBe(true);
    // Heard before: the silence limit applies from the new transport's opening.
    advance(link, 400, 3400);
    expect(events(link).filter((e) => e.type === 'disconnect')).toEqual([]);
    advance(link, 3400, 4500);
    expect(events(link)).toContainEqual({ type: 'disconnect', reason: 'nothing for 3000 ms' });
  });

  test('a transfer that stopped waiting while the link reconnected lets it close at the next failure', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    link.transportClosed('lost', 0);
    a.waiting = false;
    link.transportFailed('refused', 10);
    expect(link.state).toBe('closed');
  });

  test('reconnection off: a lost transport closes the link and its transfers', () => {
    const link = openLink({ now: 0, reconnection: { enabled: false } });
    const a = new Transfer();
    link.attach(7, a, 0);
    link.transportClosed('peer connection failed', 5);
    expect(events(link)).toEqual([{ type: 'closed', reason: 'peer connection failed' }]);
    expect(a.closedWith).toBe('peer connection failed');
    expect(link.nextDeadline()).toBeNull();
  });

  test('a closed link ignores everything after', () => {
    const link = openLink();
    const a = new Transfer();
    link.attach(7, a, 0);
    link.close('closed by the client', 1);
    link.handleDatagram(data(7), 2);
    link.transportOpened(3);
    expect(a.messages).toHaveLength(0);
    expect(a.reconnects).toHaveLength(0);
    expect(link.state).toBe('closed');
  });
});
