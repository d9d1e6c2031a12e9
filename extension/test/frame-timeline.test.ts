import type { GetOptions, GetResult } from '@mutp/shared/client';
import { normalizeSettings } from '../src/common/settings';
import { ClientLike, Downloader } from '../src/downloader/downloader';
import { FrameTimeline, MAX_ENTRIES } from '../src/downloader/timeline';

describe('FrameTimeline', () => {
  it('records start, first byte (once), datagrams and end of each download', () => {
    const timeline = new FrameTimeline();
    const entry = timeline.start('rlnc', 10);
    let clock = 50;
    FrameTimeline.progress(entry, 0, () => clock);
    clock = 70;
    FrameTimeline.progress(entry, 2000, () => clock);
    FrameTimeline.end(entry, true, 90);
    expect(timeline.snapshot()).toEqual([
      { mode: 'rlnc', startedAt: 10, firstByteAt: 50, endedAt: 90, datagrams: 2, objectBytes: 2000, ok: true },
    ]);
  });

  it('keeps only the last MAX_ENTRIES downloads, and hands out copies', () => {
    const timeline = new FrameTimeline();
    for (let i = 0; i < MAX_ENTRIES + 5; i++) timeline.start('fountain', i);
    const snapshot = timeline.snapshot();
    expect(snapshot).toHaveLength(MAX_ENTRIES);
    expect(snapshot[0].startedAt).toBe(5);
    snapshot[0].datagrams = 99;
    expect(timeline.snapshot()[0].datagrams).toBe(0);
  });
});

describe("the downloader's timeline", () => {
  const flush = () => new Promise((r) => setImmediate(r));

  it('has each download with its first datagram and end, on the frame clock', async () => {
    let now = 1000;
    let progress: GetOptions['onProgress'];
    let finish: (r: GetResult) => void = () => undefined;
    const client: ClientLike = {
      get: (_url, options) => {
        progress = options.onProgress;
        return new Promise((resolve) => (finish = resolve));
      },
      close: () => undefined,
    };
    const d = new Downloader({
      settings: () => normalizeSettings({ maxObjectBytes: 10_000, staging: false }),
      createClient: async () => client,
      now: () => now,
      setTimer: () => () => undefined,
    });
    const answer = d.handle({ type: 'get', id: 1, url: 'https://cdn.example/a.ts', mode: 'rlnc', proxies: 2 });
    await flush();
    now = 1040;
    progress?.({ dof: 0, totalDof: 10, bytes: 4, liveSources: 2, sources: 2 });
    now = 1050;
    progress?.({ dof: 1, totalDof: 10, bytes: 4, liveSources: 2, sources: 2 });
    now = 1100;
    finish({ object: Uint8Array.of(1, 2, 3, 4), mode: 'rlnc', durationMs: 60, goodputBps: 1 } as unknown as GetResult);
    await answer;
    expect(d.timeline()).toEqual([
      { mode: 'rlnc', startedAt: 1000, firstByteAt: 1040, endedAt: 1100, datagrams: 2, objectBytes: 4, ok: true },
    ]);
  });
});
