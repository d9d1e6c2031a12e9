/**
 * The client's origo session (shared/src/client/origo-session.ts) against a real origo: it keeps
 * its token, and with it its client id, across reconnects, takes renewed tokens, pings origo, and
 * refuses a plain ws:// origo on a remote host.
 */
import WebSocket from 'ws';
import { OrigoSession, systemClock, WebSocketLike } from '@mutp/shared/client';
import { closeAll, startOrigo, within } from './helpers';

afterEach(closeAll);

const webSocket = (url: string) => new WebSocket(url) as unknown as WebSocketLike;

test('a new session presenting the previous token keeps the client id and gets renewed tokens', async () => {
  const { port } = await startOrigo({ tokenTtlMs: 10_000 });
  const url = `ws://127.0.0.1:${port}/v1/client`;
  const first = new OrigoSession(url, webSocket, systemClock);
  await first.connect();
  const firstToken = first.token;
  expect(firstToken).toBeDefined();
  await within(
    new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (first.token !== firstToken) {
          clearInterval(check);
          resolve();
        }
      }, 50);
    }),
    'a renewed token',
    8000,
  );
  first.close();
  const second = new OrigoSession(url, webSocket, systemClock, 5000, first.token);
  await second.connect();
  expect(second.clientId).toBe(first.clientId);
  second.close();
  const stranger = new OrigoSession(url, webSocket, systemClock);
  await stranger.connect();
  expect(stranger.clientId).not.toBe(first.clientId);
  stranger.close();
}, 15_000);

test('a plain ws:// origo on a remote host is refused without opening a socket', async () => {
  let opened = 0;
  const counting = (u: string) => {
    opened++;
    return webSocket(u);
  };
  const session = new OrigoSession('ws://origo.example.com/v1/client', counting, systemClock, 1000);
  await expect(session.connect()).rejects.toThrow(/plain ws:\/\/ to origo.example.com is refused/);
  expect(opened).toBe(0);
});

test('ping: origo answers with the nonce; a closed session answers false at once', async () => {
  const { port } = await startOrigo();
  const session = new OrigoSession(`ws://127.0.0.1:${port}/v1/client`, webSocket, systemClock, 5000);
  await session.connect();
  expect(await session.ping(5000)).toBe(true);
  expect(await Promise.all([session.ping(5000), session.ping(5000)])).toEqual([true, true]);
  session.close();
  expect(await session.ping(5000)).toBe(false);
});
