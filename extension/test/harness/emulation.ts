/**
 * Test page script (bundled by the emulation test with esbuild): installs the real hook — the
 * same HookCore, fetch and XHR wrappers, PortTransport and Downloader as the extension — with a
 * fake MutpClient behind the Downloader that answers from the local objects (objects.ts). Query
 * parameters of an object URL steer the fake: `delay=ms` (answer after), `fail=code` (reject with
 * that ClientError code), `hang=1` (never answer).
 */
import { ClientError, GetOptions, GetResult } from '@mutp/shared/client';
import { HookCore } from '../../src/hook/core';
import { captureGlobals } from '../../src/hook/globals';
import { installHook } from '../../src/hook/install';
import { PortTransport } from '../../src/hook/transport';
import { ClientLike, Downloader } from '../../src/downloader/downloader';
import { normalizeSettings } from '../../src/common/settings';
import { HookToDownloader, SegmentRecord } from '../../src/common/messages';
import { objectFor } from './objects';
import { runFetch, runXhr, syncXhr } from './page-helpers';

const params = new URLSearchParams(location.search);
const g = captureGlobals(window);

/** What the proxies would answer: the whole object, or the asked range of it with where it sits. */
function fakeResult(whole: Uint8Array, durationMs: number, range?: GetOptions['range']): GetResult {
  const object = range ? whole.slice(range.start, range.start + range.length) : whole;
  return {
    ...(range ? { attributes: { range: { start: range.start, completeLength: whole.length } } } : {}),
    object,
    mode: 'rlnc',
    startedAt: 0,
    durationMs,
    goodputBps: (object.length * 1000) / Math.max(durationMs, 1),
    normalizedGoodput: 1,
    sources: [{ proxyId: 'p1', name: 'proxy-1', share: 1, useful: 1, received: 1 }],
  } as unknown as GetResult;
}

const fakeClient: ClientLike = {
  get(url: string, o: GetOptions): Promise<GetResult> {
    return new Promise((resolve, reject) => {
      const u = new URL(url);
      const delay = Number(u.searchParams.get('delay') ?? 5);
      const fail = u.searchParams.get('fail');
      if (o.signal?.aborted) return reject(new ClientError('cancelled', 'aborted'));
      o.signal?.addEventListener('abort', () => reject(new ClientError('cancelled', 'aborted')));
      if (u.searchParams.get('hang')) return;
      if (params.get('source') === 'network') {
        // Players test: the bytes come from the server (read with the page's native fetch).
        g.fetch
          .call(window, url)
          .then((r) =>
            r.ok ? r.arrayBuffer() : Promise.reject(new ClientError('download-failed', `HTTP ${r.status}`)),
          )
          .then((buf) => resolve(fakeResult(new Uint8Array(buf), 1, o.range)), reject);
        return;
      }
      setTimeout(() => {
        if (fail) return reject(new ClientError(fail as ClientError['code'], `fake ${fail}`));
        const obj = objectFor(u.pathname);
        if (!obj) return reject(new ClientError('download-failed', 'not found'));
        if (o.range && o.range.start >= obj.bytes.length)
          return reject(new ClientError('download-failed', 'all sources failed: range not satisfiable (8)'));
        const result = fakeResult(obj.bytes.slice(), delay, o.range);
        o.onProgress?.({ dof: 1, totalDof: 1, bytes: result.object.length, liveSources: 1, sources: 1 });
        resolve(result);
      }, delay);
    });
  },
  close() {},
};

const records: SegmentRecord[] = [];
const settings = normalizeSettings({ maxObjectBytes: 1_000_000, rangeCacheBytes: 4_000_000 });
const downloader = new Downloader({
  settings: () => settings,
  createClient: async () => fakeClient,
  now: () => performance.now(),
  onRecord: (r) => records.push(r),
});

// The downloader end of port B, as in downloader/main.ts.
const channel = new MessageChannel();
channel.port2.onmessage = (event: MessageEvent) => {
  const m = event.data as HookToDownloader;
  if (m.type === 'hello') channel.port2.postMessage({ type: 'ready' });
  else if (m.type === 'cancel') downloader.cancel(m.id);
  else if (m.type === 'get') {
    downloader.handle(m).then((a) => {
      if (a) channel.port2.postMessage(a, a.ok ? [a.body] : []);
    });
  }
};

const transport = new PortTransport(
  () => setTimeout(() => transport.attach(channel.port1), 20),
  g,
  g.now,
  () => ({ session: 'test', pageUrl: location.href }),
);
const core = new HookCore(transport, g, g.now);
installHook(core, g);
core.setConfig({
  enabled: params.get('enabled') !== '0',
  disabledReason: params.get('enabled') === '0' ? 'disabled' : undefined,
  mode: 'rlnc',
  proxies: 2,
  deadlineMs: Number(params.get('deadline') ?? 1500),
  urlPatterns: ['*/obj/*', '*/text/*', '*/json/*'],
  exposeCounters: true,
});

Object.assign(window, {
  __harness: { counters: () => structuredClone(core.counters), records: () => records.slice() },
});

Object.assign(window, { __t: { runXhr, runFetch, syncXhr } });
