/**
 * Origo back after a restart serves offers only once proxies have re-registered (issue 34): a
 * client resuming its session (a token from before the restart) whose request-proxies comes
 * before enough proxies are back waits for them, within one heartbeat interval, instead of being
 * answered with none. Fresh clients are answered at once, and a client holds one request at most.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIGNALLING_VERSION } from '@mutp/shared';
import type { OrigoOptions } from '../src/config';
import { closeAll, connectClient, connectProxy, requestProxies, startOrigo, TestPeer, within } from './helpers';

let dir: string;
let tokenKey: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'origo-restart-'));
  tokenKey = join(dir, 'token.pem');
  writeFileSync(tokenKey, generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }));
});
afterEach(() => closeAll());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A token a client got from an origo that has since stopped (the same key signs for the next one). */
async function tokenFromBefore(options: Partial<OrigoOptions>): Promise<string> {
  const before = await startOrigo(options);
  const peer = await TestPeer.open(before.port, '/v1/client', 'client before the restart');
  peer.send({ type: 'hello', version: SIGNALLING_VERSION });
  const welcome = await peer.next('welcome');
  peer.close();
  await before.origo.close();
  return welcome.token as string;
}

/** A client resuming its session on `port` with `token`. */
async function resume(port: number, token: string): Promise<TestPeer> {
  const peer = await TestPeer.open(port, '/v1/client', 'resuming client');
  peer.send({ type: 'hello', version: SIGNALLING_VERSION, token });
  await peer.next('welcome');
  return peer;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('a resuming client asking before its proxies re-registered gets them once they have, not none', async () => {
  const options = { tokenKeyFile: tokenKey, heartbeatIntervalMs: 3000 };
  const token = await tokenFromBefore(options);
  const after = await startOrigo(options);
  const client = await resume(after.port, token);
  const fresh = await connectClient(after.port, 'fresh client');
  const asked = requestProxies(client, 2);
  // A fresh client (nothing to say origo restarted) is answered at once, with what there is.
  expect(await within(requestProxies(fresh, 2), 'the fresh client’s answer', 1000)).toEqual([]);
  await sleep(300);
  const p1 = await connectProxy(after.port, { name: 'edge-1' });
  const p2 = await connectProxy(after.port, { name: 'edge-2' });
  const offered = await within(asked, 'the held request’s answer', 2500);
  expect(offered.sort()).toEqual([p1.id, p2.id].sort());
});

test('the grace is bounded: too few proxies by its end, the request is answered with those', async () => {
  const options = { tokenKeyFile: tokenKey, heartbeatIntervalMs: 600 };
  const token = await tokenFromBefore(options);
  const after = await startOrigo(options);
  const client = await resume(after.port, token);
  const p1 = await connectProxy(after.port, { name: 'edge-1' });
  const started = Date.now();
  const offered = await within(requestProxies(client, 3), 'the answer at the end of the grace', 2000);
  expect(offered).toEqual([p1.id]);
  expect(Date.now() - started).toBeGreaterThanOrEqual(100);
  // After the grace every request is answered at once.
  expect(await within(requestProxies(client, 3), 'an answer after the grace', 500)).toEqual([p1.id]);
});

test('one held request per client: a second one meanwhile is answered at once', async () => {
  const options = { tokenKeyFile: tokenKey, heartbeatIntervalMs: 3000 };
  const token = await tokenFromBefore(options);
  const after = await startOrigo(options);
  const client = await resume(after.port, token);
  const held = requestProxies(client, 2);
  expect(await within(requestProxies(client, 2), 'the second request’s answer', 1000)).toEqual([]);
  const p1 = await connectProxy(after.port, { name: 'edge-1' });
  const p2 = await connectProxy(after.port, { name: 'edge-2' });
  expect((await within(held, 'the held request’s answer', 2500)).sort()).toEqual([p1.id, p2.id].sort());
});
