/**
 * `trustProxy`: behind a TLS reverse proxy every socket comes from its address; X-Forwarded-For
 * names the client only when the socket comes from a listed proxy, so per-address budgets count
 * real clients there and a header from anyone else changes nothing.
 */
import WebSocket from 'ws';
import { SIGNALLING_VERSION } from '@mutp/shared';
import { closeAll, startOrigo } from './helpers';

afterEach(() => closeAll());

/** Opens a client socket claiming `forwardedFor`: 'welcome' when admitted, else the close code. */
async function connect(port: number, forwardedFor: string, opened: WebSocket[]): Promise<number | 'welcome'> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/client`, { headers: { 'x-forwarded-for': forwardedFor } });
  opened.push(socket);
  socket.on('error', () => {});
  return new Promise((resolve) => {
    socket.once('close', (code) => resolve(code));
    socket.once('open', () => socket.send(JSON.stringify({ type: 'hello', version: SIGNALLING_VERSION })));
    socket.on('message', (data) => {
      if ((JSON.parse(String(data)) as { type: string }).type === 'welcome') resolve('welcome');
    });
  });
}

async function outcomes(trustProxy: string[]): Promise<(number | 'welcome')[]> {
  // One socket per address: the first stays open, so a second from the same address is refused.
  const { port } = await startOrigo({ trustProxy, maxSocketsPerAddress: 1 });
  const opened: WebSocket[] = [];
  try {
    const first = await connect(port, '198.51.100.1', opened);
    const second = await connect(port, '198.51.100.2', opened);
    return [first, second];
  } finally {
    for (const socket of opened) socket.terminate();
  }
}

test('a listed reverse proxy names each client: two clients behind it are budgeted apart', async () => {
  expect(await outcomes(['127.0.0.1'])).toEqual(['welcome', 'welcome']);
});

test('without trust, or from an unlisted address, the header is ignored: one address, one budget', async () => {
  expect(await outcomes([])).toEqual(['welcome', 1013]);
  expect(await outcomes(['10.0.0.0/8'])).toEqual(['welcome', 1013]);
});

test('a bad entry is refused at start, naming it', async () => {
  await expect(startOrigo({ trustProxy: ['not-an-address'] })).rejects.toThrow(
    /"not-an-address" is not an IP address or CIDR/,
  );
});
