/**
 * Test page script for settings-wait.browser.test.ts (bundled with esbuild): the real hook is
 * installed at once, but gets its settings only `settingsAfter` ms later (or never), as when the
 * content script's storage round trip loses the race against a player in <head> (issue 35).
 * While this script runs, during parsing, the page makes its first requests. The downloader is a
 * transport that reads the test server with the page's native fetch: an answer served through it
 * reaches the page without the server's `x-from: network` header.
 */
import { DownloaderTransport, HookCore } from '../../src/hook/core';
import { captureGlobals } from '../../src/hook/globals';
import { installHook } from '../../src/hook/install';
import { runFetch, runXhr } from './page-helpers';

const g = captureGlobals(window);

const transport: DownloaderTransport = {
  request(req, answer) {
    const range = req.range?.kind === 'from' ? `bytes=${req.range.start}-${req.range.end ?? ''}` : undefined;
    const fail = () => answer({ type: 'result', id: req.id, ok: false, reason: 'download-failed', message: 'fetch' });
    g.fetch
      .call(window, req.url, range ? { headers: { range } } : {})
      .then(async (r) => {
        const contentRange = r.headers.get('content-range');
        answer({
          type: 'result',
          id: req.id,
          ok: true,
          body: await r.arrayBuffer(),
          status: r.status as 200 | 206,
          contentType: r.headers.get('content-type') ?? 'application/octet-stream',
          ...(contentRange ? { contentRange } : {}),
        });
      })
      .catch(fail);
  },
  cancel() {},
};

const core = new HookCore(transport, g, g.now);
installHook(core, g);

/** What the page asks for while it parses: two ranged media requests and one that is not media. */
const early = Promise.all([
  runXhr({ url: '/seg/all.mp4', responseType: 'arraybuffer', headers: { Range: 'bytes=0-99' } }),
  runFetch({ url: '/seg/all.mp4', init: { headers: { Range: 'bytes=100-199' } } }),
  runFetch({ url: '/text/early', read: 'text' }),
]);

const settingsAfter = new URLSearchParams(location.search).get('settingsAfter');
if (settingsAfter !== null) {
  setTimeout(
    () =>
      core.setConfig({
        enabled: true,
        mode: 'rlnc',
        proxies: 2,
        deadlineMs: 5000,
        urlPatterns: [],
        exposeCounters: false,
      }),
    Number(settingsAfter),
  );
}

Object.assign(window, { __late: { early, counters: () => structuredClone(core.counters) } });
