/**
 * Origo's own test helpers. The in-process origo and the fake clients are shared with the proxy and
 * client tests, so they live in @mutp/testing/origo and are re-exported here; what only origo's
 * tests use (fake proxies, keys files, round-trip barriers, `within`) is below.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIGNALLING_VERSION } from '@mutp/shared';
import { type Json, requestProxies, SECRET, TestPeer, track } from '@mutp/testing/origo';

export {
  ADMIN,
  ANSWER,
  CANDIDATE,
  closeAll,
  connectClient,
  getJson,
  type LogLine,
  OFFER,
  requestProxies,
  SECRET,
  startOrigo,
  type TestOrigo,
  TestPeer,
  track,
} from '@mutp/testing/origo';

const WAIT_MS = 5000;

/** Waits for a promise at most `ms`, failing with what was awaited. */
export async function within<T>(promise: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface ProxyOptions {
  proxyId?: string;
  name?: string;
  capacityBps?: number;
  maxTransfers?: number;
  modes?: string[];
  secret?: string;
}

/** A well-formed Ed25519 public key for fake proxies (origo only passes it on). */
export const TEST_ASSERTION_KEY = 'A'.repeat(43);

export function registerMessage(o: ProxyOptions = {}): Json {
  const name = o.name ?? 'edge';
  return {
    type: 'register',
    version: SIGNALLING_VERSION,
    secret: o.secret ?? SECRET,
    ...(o.proxyId !== undefined ? { proxyId: o.proxyId } : {}),
    name,
    httpUrl: `http://${name}.test:8800/`,
    capacityBps: o.capacityBps ?? 1_000_000,
    maxTransfers: o.maxTransfers ?? 16,
    modes: o.modes ?? ['uncoded', 'rlnc', 'fountain'],
    assertionKey: TEST_ASSERTION_KEY,
  };
}

/** A registered fake proxy; `id` is the proxyId origo confirmed. */
export async function connectProxy(port: number, o: ProxyOptions = {}): Promise<TestPeer & { id: string }> {
  const peer = await TestPeer.open(port, '/v1/proxy', `proxy ${o.name ?? o.proxyId ?? ''}`);
  peer.send(registerMessage(o));
  const registered = await peer.next('registered');
  return Object.assign(peer, { id: registered.proxyId as string });
}

export function heartbeat(proxy: TestPeer, activeTransfers: number, uploadBps: number, capacityBps: number): void {
  proxy.send({ type: 'heartbeat', activeTransfers, uploadBps, capacityBps });
}

/**
 * A round trip through origo on a client's socket: once it returns, every frame the client sent
 * before has been handled (origo handles one socket's frames in order), and so has every message
 * origo sent to other sockets because of them been written before.
 */
export async function barrier(client: TestPeer): Promise<void> {
  await requestProxies(client, 1);
}

let barriers = 0;
/** The same for a proxy: a signal for an unknown connection comes back as an error. */
export async function proxyBarrier(proxy: TestPeer): Promise<void> {
  const connectionId = `barrier-${++barriers}`;
  proxy.send({ type: 'signal', connectionId, candidate: { candidate: '', mid: '0' } });
  await proxy.next('error', (m) => m.code === 'unknown-connection' && String(m.message).includes(connectionId));
}

/** Writes a --proxy-keys file (removed by closeAll). */
export function keysFile(keys: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'origo-keys-'));
  const file = join(dir, 'proxy-keys.json');
  writeFileSync(file, JSON.stringify(keys));
  track({ close: async () => rmSync(dir, { recursive: true, force: true }) });
  return file;
}

export const KEY9 = 'key-of-edge-9-0123456789';
