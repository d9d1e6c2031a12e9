/**
 * One generator worker process (forked by generator.ts): holds its share of the simulated
 * proxies and clients, drives its share of the offers and reports its RunBook. One process
 * cannot hold 50,000 sockets under the open-file limit, nor drive them on one event loop
 * without becoming what the run measures.
 */
import { bookToJson } from './book-wire';
import { drive } from './offers';
import { fakeSdp, HandshakeError, RunBook, SimClient, SimProxy } from './peers';
import { inPool } from './pool';
import { PROGRESS_STEP, type Progress, type Reply, type Request } from './generator';

const book = new RunBook();
const proxies: SimProxy[] = [];
const clients: SimClient[] = [];
let stopDriving: ((drainMs: number) => Promise<void>) | undefined;

const handshakeFailure = (tally: typeof book.failures.proxyHandshake) => (err: unknown) => {
  if (!(err instanceof HandshakeError)) throw err;
  tally.add(err.kind);
};

/** Counts handshakes done (or failed) and tells the parent every PROGRESS_STEP of them. */
function progress(op: Progress['progress']['op']): () => void {
  let done = 0;
  return () => {
    if (++done % PROGRESS_STEP === 0) process.send!({ progress: { op, done } } satisfies Progress);
  };
}

async function handle(r: Request): Promise<Reply['result']> {
  switch (r.op) {
    case 'proxies': {
      const step = progress('proxies');
      await inPool(r.peers.length, r.concurrency, async (k) => {
        const p = r.peers[k];
        await SimProxy.connect(
          {
            url: p.url,
            localAddress: p.localAddress,
            proxyId: p.id,
            instance: p.instance,
            timeoutMs: r.timeoutMs,
            sdpBytes: r.sdpBytes,
          },
          book,
        ).then((proxy) => {
          proxy.startHeartbeats();
          proxies.push(proxy);
        }, handshakeFailure(book.failures.proxyHandshake));
        step();
      });
      return { peers: proxies.length };
    }
    case 'clients': {
      const settings = { requestCount: r.requestCount, offerSdp: fakeSdp('offer', r.sdpBytes), instances: r.instances };
      const connected: (SimClient | undefined)[] = new Array(r.peers.length);
      const step = progress('clients');
      await inPool(r.peers.length, r.concurrency, async (k) => {
        const c = r.peers[k];
        await SimClient.connect(
          { url: c.url, localAddress: c.localAddress, index: c.index, instance: c.instance, timeoutMs: r.timeoutMs },
          book,
          settings,
        ).then((client) => {
          connected[k] = client;
        }, handshakeFailure(book.failures.clientHandshake));
        step();
      });
      for (const client of connected) if (client) clients.push(client);
      return { peers: clients.length };
    }
    case 'drive': {
      const active = clients.filter((c) => c.spec.index < r.activeBelow);
      if (active.length > 0) stopDriving = drive(book, active, { ...r.settings, offerRate: r.offerRate });
      return { peers: active.length };
    }
    case 'measure':
      book.measuring = r.on;
      return {
        peers: 0,
        open: { clients: clients.filter((c) => c.open).length, proxies: proxies.filter((p) => p.open).length },
      };
    case 'stop':
      await stopDriving?.(r.drainMs);
      return { peers: 0, book: bookToJson(book) };
    case 'close':
      await Promise.all([...clients, ...proxies].map((peer) => peer.close(r.timeoutMs)));
      return { peers: 0 };
  }
}

process.on('message', (r: Request) => {
  handle(r).then(
    (result) => process.send!({ id: r.id, result } satisfies Reply),
    (err: unknown) => process.send!({ id: r.id, error: String((err as Error)?.stack ?? err) } satisfies Reply),
  );
});
// The parent went away (it ended or was killed): nothing here may outlive it.
process.on('disconnect', () => process.exit(0));
