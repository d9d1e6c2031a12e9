/**
 * The hook's side of port B: requests to the downloader frame and its answers. The frame is made
 * on demand (the first intercepted request asks the content script for it); requests wait for it
 * a bounded time, and if it does not come they fail at once for a while ('downloader-unavailable')
 * instead of each waiting out its deadline.
 */
import { DownloaderToHook, GetFailure, GetRequest, GetSuccess, HookToDownloader, isObject } from '../common/messages';
import { DownloaderTransport, Timers } from './core';

export const CONNECT_TIMEOUT_MS = 5000;
export const RETRY_AFTER_MS = 30_000;

type Answer = (a: GetSuccess | GetFailure) => void;

export class PortTransport implements DownloaderTransport {
  private port?: MessagePort;
  private state: 'none' | 'connecting' | 'ready' | 'failed' = 'none';
  private failedAt = 0;
  private failReason = 'downloader-unavailable';
  private connectTimer?: unknown;
  private readonly queue: GetRequest[] = [];
  private readonly waiting = new Map<number, Answer>();

  constructor(
    private readonly askForDownloader: () => void,
    private readonly timers: Timers,
    private readonly now: () => number,
    private readonly hello: () => { session: string; pageUrl: string },
    /** How to post on a port (the hook passes the postMessage it captured at document_start). */
    private readonly postOn: (port: MessagePort, message: unknown) => void = (port, message) =>
      port.postMessage(message),
  ) {}

  request(req: GetRequest, answer: Answer): void {
    if (this.state === 'failed') {
      if (this.now() - this.failedAt < RETRY_AFTER_MS) {
        answer(this.failure(req.id, this.failReason));
        return;
      }
      this.state = 'none';
    }
    this.waiting.set(req.id, answer);
    if (this.state === 'ready' && this.port) {
      this.post(req);
      return;
    }
    this.queue.push(req);
    if (this.state === 'none') this.connect();
  }

  /** Gets the downloader frame ready ahead of the first request (a manifest was seen). */
  prepare(): void {
    if (this.state === 'none') this.connect();
  }

  cancel(id: number): void {
    this.waiting.delete(id);
    const queued = this.queue.findIndex((r) => r.id === id);
    if (queued >= 0) this.queue.splice(queued, 1);
    else if (this.state === 'ready') this.post({ type: 'cancel', id });
  }

  /** Port B arrived (from the content script); usable once the frame answers 'ready'. */
  attach(port: MessagePort): void {
    if (this.port) {
      this.port.close();
      // Requests the old frame had are lost with it.
      const queued = new Set(this.queue.map((r) => r.id));
      for (const id of [...this.waiting.keys()]) {
        if (!queued.has(id)) this.answer(this.failure(id, 'downloader-unavailable'));
      }
    }
    this.port = port;
    if (this.state !== 'connecting') this.connect(false);
    port.onmessage = (event: MessageEvent) => {
      if (this.port === port) this.onMessage(event.data);
    };
    this.post({ type: 'hello', ...this.hello() });
  }

  /** The content script could not make the frame. */
  fail(reason: string): void {
    this.state = 'failed';
    this.failedAt = this.now();
    this.failReason = /^[a-z0-9-]{1,40}$/.test(reason) ? reason : 'downloader-unavailable';
    if (this.connectTimer !== undefined) this.timers.clearTimeout(this.connectTimer);
    this.connectTimer = undefined;
    const queued = this.queue.splice(0);
    for (const req of queued) this.answer(this.failure(req.id, this.failReason));
  }

  private connect(ask = true): void {
    this.state = 'connecting';
    if (this.connectTimer !== undefined) this.timers.clearTimeout(this.connectTimer);
    this.connectTimer = this.timers.setTimeout(() => {
      this.connectTimer = undefined;
      if (this.state === 'connecting') this.fail('downloader-unavailable');
    }, CONNECT_TIMEOUT_MS);
    if (!ask) return;
    try {
      this.askForDownloader();
    } catch {
      this.fail('downloader-unavailable');
    }
  }

  private ready(): void {
    if (this.state === 'ready') return;
    this.state = 'ready';
    if (this.connectTimer !== undefined) this.timers.clearTimeout(this.connectTimer);
    this.connectTimer = undefined;
    const queued = this.queue.splice(0);
    for (const req of queued) this.post(req);
  }

  private post(message: HookToDownloader): void {
    try {
      this.postOn(this.port!, message);
    } catch {
      if (message.type === 'get') this.answer(this.failure(message.id, 'downloader-unavailable'));
    }
  }

  private onMessage(data: unknown): void {
    if (!isObject(data)) return;
    const m = data as DownloaderToHook;
    if (m.type === 'ready') this.ready();
    else if (m.type === 'result' && typeof m.id === 'number') this.answer(m);
  }

  private answer(a: GetSuccess | GetFailure): void {
    const cb = this.waiting.get(a.id);
    if (!cb) return;
    this.waiting.delete(a.id);
    cb(a);
  }

  private failure(id: number, reason: string): GetFailure {
    return { type: 'result', id, ok: false, reason, message: reason };
  }
}
