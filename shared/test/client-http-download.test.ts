/** The Parallel HTTP path over a fake fetch that honours its abort signal as fetch does (written by a helper session, adapted). */
import { createHash } from 'node:crypto';
import { ProxyInfo } from '../src';
import { ClientError, FetchLike, runHttpDownload } from '../src/client';
import { FakeClock } from './helpers/fake-host';

const OBJECT = new Uint8Array(5000).map((_, i) => (i * 31 + 7) & 0xff);
const hex = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const sha256 = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());
const proxies: ProxyInfo[] = ['a', 'b'].map((n) => ({
  proxyId: `p-${n}`,
  name: n,
  httpUrl: `http://${n}.example`,
  capacityBps: 1,
}));

const honestFetch: FetchLike = (_url, init) => {
  if (init.signal.aborted) return Promise.reject(new Error('aborted'));
  return Promise.resolve({
    ok: true,
    status: 200,
    headers: { get: (name: string) => ({ 'x-mutp-sha256': hex(OBJECT) })[name] ?? null },
    body: new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(OBJECT);
        controller.close();
      },
    }),
  });
};

test('two proxies stating the same digest make a quorum', async () => {
  const r = await runHttpDownload(proxies, 'https://cdn.example/s.ts', honestFetch, new FakeClock(), {
    maxBytes: 1 << 20,
    sha256,
  });
  expect(hex(r.object)).toBe(hex(OBJECT));
  expect(r.polluters).toEqual([]);
});

test('a signal aborted before the download starts cancels it', async () => {
  const controller = new AbortController();
  controller.abort();
  const error = await runHttpDownload(proxies, 'https://cdn.example/s.ts', honestFetch, new FakeClock(), {
    maxBytes: 1 << 20,
    sha256,
    signal: controller.signal,
  }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ClientError);
  expect((error as ClientError).code).toBe('cancelled');
});
