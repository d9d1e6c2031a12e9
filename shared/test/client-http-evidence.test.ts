/**
 * Parallel HTTP through a MutpClient (issue 31, evidence): what the client tells origo when proxies
 * with published keys sign answers that disagree, or serve other bytes than they signed. Fake
 * origo and fake time (helpers/fake-host.ts); the proxies' answers are signed as the real proxy
 * signs them (signHttpAnswer), with real Ed25519 keys.
 */
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { decode, MessageType, signHttpAnswer } from '../src/internal';
import { ClientOptions, FetchLike, MutpClient } from '../src/client';
import { FakeHost, FakeProxy, objectOf, proxy, settle } from './helpers/fake-host';

const URL_ = 'https://media.example/seg-1.m4s';
const OBJECT = objectOf(20_000, 1);
const FAKE = objectOf(20_000, 2);
const sha256 = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());

interface Answer {
  /** What it sends. */
  body: Uint8Array;
  /** What it signs (default: its body). */
  signed?: Uint8Array;
  delayMs: number;
}

/** A proxy origo offers with its assertion key, answering /v1/http as `answer` says. */
function keyedProxy(id: string, answer: Answer): { info: FakeProxy; fetch: FetchLike } {
  const pair = generateKeyPairSync('ed25519');
  const info = proxy(id);
  info.info.assertionKey = pair.publicKey.export({ format: 'jwk' }).x as string;
  const signer = { proxyId: id, sign: (m: Uint8Array) => new Uint8Array(sign(null, m, pair.privateKey)) };
  const signed = answer.signed ?? answer.body;
  const meta = signHttpAnswer(
    { bytes: signed, digest: sha256(signed), attributes: { contentType: 'video/mp4' } },
    { url: URL_ },
    signer,
    sha256,
  );
  const headers: Record<string, string> = {
    'content-type': 'video/mp4',
    'content-length': String(answer.body.length),
    'x-mutp-meta': Buffer.from(meta).toString('base64'),
  };
  return {
    info,
    fetch: () =>
      Promise.resolve({
        ok: true,
        status: 200,
        headers: { get: (name: string) => headers[name] ?? null },
        body: new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(answer.body);
            controller.close();
          },
        }),
      }),
  };
}

function setup(answers: Record<string, Answer>) {
  const proxies = Object.entries(answers).map(([id, a]) => ({ id, delayMs: a.delayMs, ...keyedProxy(id, a) }));
  const host = new FakeHost({ proxies: proxies.map((p) => p.info) });
  host.fetch = (url, init) => {
    const p = proxies.find((x) => url.startsWith(x.info.info.httpUrl));
    if (!p) return Promise.reject(new Error(`no proxy at ${url}`));
    return new Promise((resolve) => host.clock.setTimer(p.delayMs, () => resolve(p.fetch(url, init))));
  };
  const client = new MutpClient(host, {
    origoUrl: 'wss://origo.example/v1/client',
    codecs: {} as ClientOptions['codecs'],
  });
  return { host, client };
}

test('a rogue signing another object: the download fails, and origo gets both signed statements', async () => {
  const { host, client } = setup({
    rogue: { body: FAKE, delayMs: 0 },
    a: { body: OBJECT, delayMs: 30 },
    b: { body: OBJECT, delayMs: 50 },
  });
  const error = await settle(host.clock, client.get(URL_, { mode: 'http', proxies: 3 })).catch((e: unknown) => e);
  expect(String(error)).toMatch(/disagree/);
  const conflict = host.origoHeard.find((m) => m.type === 'conflict') as
    { url: string; statements: { proxyId: string; meta: string }[] } | undefined;
  expect(conflict?.url).toBe(URL_);
  const stated = conflict!.statements.map((s) => {
    const m = decode(Buffer.from(s.meta, 'base64'));
    if (!m.ok || m.value.type !== MessageType.Meta) throw new Error('not a META');
    return [s.proxyId, Buffer.from(m.value.digest).equals(sha256(FAKE)) ? 'fake' : 'true'];
  });
  expect(stated).toContainEqual(['rogue', 'fake']);
  expect(stated.filter(([, d]) => d === 'true').length).toBeGreaterThanOrEqual(1);
  client.close();
});

test('a proxy serving other bytes than it signed is reported and not asked for again', async () => {
  const { host, client } = setup({
    liar: { body: FAKE, signed: OBJECT, delayMs: 0 },
    a: { body: OBJECT, delayMs: 30 },
    b: { body: OBJECT, delayMs: 50 },
  });
  const result = await settle(host.clock, client.get(URL_, { mode: 'http', proxies: 3 }));
  expect(Buffer.from(result.object).equals(Buffer.from(OBJECT))).toBe(true);
  expect(host.origoHeard).toContainEqual({ type: 'report', proxyId: 'liar', kind: 'data' });
  await settle(host.clock, client.get(URL_, { mode: 'http', proxies: 2 }));
  const asked = host.origoHeard.filter((m) => m.type === 'request-proxies').at(-1) as { exclude: string[] };
  expect(asked.exclude).toContain('liar');
  client.close();
});
