/**
 * http mode's progress moves as bytes arrive, not once per range: a real HTTP server on loopback
 * plays a proxy that sends half of a range and holds the rest until the test has seen the
 * download's progress (split-download's onBytes, as the progress line gets it) inside the range.
 */
import { createHash } from 'node:crypto';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ProxyInfo } from '@mutp/shared';
import { FetchLike, runHttpDownload, systemClock } from '@mutp/shared/client';
import { downloadSplit, SplitProgress } from '../src/split-download';

const OBJECT = Buffer.alloc(300_000, 0).map((_, i) => (i * 29 + 5) & 0xff);
const sha256 = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

/** A proxy's /v1/http that sends the first half of each range at once and the rest on `release`. */
async function holdingProxy(release: Promise<void>): Promise<ProxyInfo> {
  server = createServer((req, res) => {
    const query = new URL(req.url ?? '/', 'http://proxy.invalid').searchParams;
    const start = Number(query.get('start'));
    const body = OBJECT.subarray(start, start + Number(query.get('length')));
    res.writeHead(200, {
      'content-type': 'video/mp2t',
      'content-length': body.length,
      'x-mutp-sha256': createHash('sha256').update(body).digest('hex'),
      'x-mutp-range-start': String(start),
      'x-mutp-complete-length': String(OBJECT.length),
    });
    const half = Math.floor(body.length / 2);
    res.write(body.subarray(0, half));
    void release.then(() => res.end(body.subarray(half)));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { proxyId: 'p-edge', name: 'edge', httpUrl: `http://127.0.0.1:${port}`, capacityBps: 1 };
}

test('the bytes of a range count as they arrive, with the proxy counter; the range is intact', async () => {
  let releaseRest!: () => void;
  const release = new Promise<void>((resolve) => (releaseRest = resolve));
  const proxy = await holdingProxy(release);
  const seen: number[] = [];
  let midRangeCounts: { done: number; proxyBytes: number } | undefined;
  let midRange!: () => void;
  const reachedMidRange = new Promise<void>((resolve) => (midRange = resolve));
  const bound = setTimeout(releaseRest, 15_000); // never hangs: the assertions below then fail

  const kept: Buffer[] = [];
  const sink = {
    write: (_offset: number, bytes: Uint8Array) => (kept.push(Buffer.from(bytes)), Promise.resolve()),
    commit: (_p: SplitProgress) => Promise.resolve(),
  };
  const result = downloadSplit(
    (range, onProgress) =>
      runHttpDownload([proxy], 'https://cdn.example/seg.ts', globalThis.fetch as unknown as FetchLike, systemClock, {
        maxBytes: 1 << 20,
        sha256,
        range,
        onProgress,
      }),
    { start: 0, chunkBytes: 100_000 },
    sink,
    undefined,
    {
      onBytes: (done, _total, progress) => {
        seen.push(done);
        // Inside the first range, before its second half was sent.
        if (done > 0 && done < 100_000) {
          const proxyBytes = progress.sourceCounters?.().find((c) => c.proxyId === 'p-edge')?.bytes ?? -1;
          midRangeCounts ??= { done, proxyBytes };
          midRange();
        }
      },
    },
  );
  await Promise.race([reachedMidRange, release]);
  releaseRest();
  clearTimeout(bound);
  const split = await result;

  expect(seen.some((done) => done > 0 && done < 100_000)).toBe(true);
  // One proxy: the bytes done are its bytes, at most the half it sent before the release.
  expect(midRangeCounts).toEqual({ done: midRangeCounts?.proxyBytes, proxyBytes: expect.any(Number) });
  expect(midRangeCounts!.done).toBeLessThanOrEqual(50_000);
  expect(seen.every((done, i) => i === 0 || done >= seen[i - 1])).toBe(true);
  expect(Buffer.concat(kept).equals(OBJECT)).toBe(true);
  expect(split.ranges).toBe(3);
});
