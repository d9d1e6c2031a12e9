/**
 * One page XMLHttpRequest object as the hook runs it: the state machine behind the wrapper that
 * xhr.ts installs. open() and setRequestHeader() always reach the native object, so a request the
 * hook does not serve — or one MUTP could not answer — is sent by the native send() exactly as the
 * page made it. An intercepted request is emulated: readyState 1→2→3→4 with readystatechange,
 * loadstart/progress/load/loadend ProgressEvents, status, headers, responseURL, every
 * responseType players use, abort(), timeout, in the XHR standard's order of events. A media
 * request sent before the hook has its settings is emulated from send() on while it waits for
 * them (settings-wait.ts), then served or sent natively.
 *
 * The native object and the event dispatch are injected (`NativeXhr`, `XhrEvents`), so unit tests
 * drive this class with plain objects, a HookCore over a fake transport and fake timers.
 */
import { Decision, RequestFacts } from './decide';
import { HookCore, InterceptDecision, LaterDecision, Ruling } from './core';
import { PageGlobals } from './globals';
import { GetSuccess } from '../common/messages';
import { EmulatedResponse } from './xhr-response';

/** The page's native XMLHttpRequest members, bound to one object. */
export interface NativeXhr {
  /** The page's arguments as given (how many there are matters: open(m, u) is async). */
  open(args: unknown[]): void;
  send(body: unknown): void;
  abort(): void;
  setRequestHeader(name: string, value: string): void;
  getResponseHeader(name: string): string | null;
  getAllResponseHeaders(): string;
  overrideMimeType(mime: string): void;
  readonly readyState: number;
  readonly status: number;
  readonly statusText: string;
  readonly responseURL: string;
  readonly response: unknown;
  readonly responseText: string;
  readonly responseXML: unknown;
  readonly withCredentials: boolean;
  responseType: string;
  timeout: number;
}

/** Dispatches the emulated request's events on the page's object. */
export interface XhrEvents {
  fire(type: string): void;
  fireProgress(type: string, loaded: number, total: number, lengthComputable: boolean): void;
}

/** What this class takes from the page globals captured at document_start. */
export type XhrGlobals = Pick<
  PageGlobals,
  'setTimeout' | 'clearTimeout' | 'now' | 'baseUrl' | 'origin' | 'TextDecoder' | 'Blob' | 'DOMException'
>;

type ReadyState = 0 | 1 | 2 | 3 | 4;
type Phase = 'idle' | 'opened' | 'native' | 'emulated';

/** One emulated request cycle, from send() until the next open(). */
interface Emulation {
  readyState: ReadyState;
  /** Set when the answer arrives; cleared by a network error (abort, timeout, error). */
  response?: EmulatedResponse;
  sentAt: number;
  /** What the page's abort() cancels: the wait for the settings, then the downloader's request. */
  pending?: { cancel(): void };
  timer?: unknown;
}

export class XhrRequest {
  private phase: Phase = 'idle';
  private method = 'GET';
  private url = '';
  private async = true;
  private hasUserInfo = false;
  private headers: [string, string][] = [];
  private mimeOverride?: string;
  /** The timeout the page set (the native one may be shortened after a fallback). */
  private pageTimeout?: number;
  /** Bumped whenever the current request cycle ends (open, abort, timeout): stale callbacks check it. */
  private gen = 0;
  private emu?: Emulation;
  private suppressLoadstart = false;

  constructor(
    private readonly native: NativeXhr,
    private readonly events: XhrEvents,
    private readonly core: HookCore,
    private readonly g: XhrGlobals,
  ) {}

  /** Drop the native loadstart: a fallback sends natively and ours already fired. */
  get suppressesNativeLoadstart(): boolean {
    return this.suppressLoadstart;
  }

  // ------------------------------------------------------------------------- the page's methods

  open(...args: unknown[]): void {
    const before = { phase: this.phase, emu: this.emu };
    // Native open() fires readystatechange(1) synchronously: getters must already answer natively.
    this.phase = 'opened';
    this.emu = undefined;
    try {
      this.native.open(args);
    } catch (error) {
      this.phase = before.phase;
      this.emu = before.emu;
      throw error;
    }
    // open() ends any request in progress without events (the standard's "terminate").
    this.gen++;
    if (before.phase === 'emulated' && before.emu) {
      this.stopTimer(before.emu);
      before.emu.pending?.cancel();
    }
    this.method = String(args[0]);
    this.url = String(args[1]);
    this.async = args.length < 3 ? true : Boolean(args[2]);
    this.hasUserInfo = (args[3] !== undefined && args[3] !== null) || (args[4] !== undefined && args[4] !== null);
    this.headers = [];
    this.mimeOverride = undefined;
    if (this.async && this.pageTimeout !== undefined && this.native.timeout !== this.pageTimeout) {
      // A fallback shortened the native timeout for the previous request: restore the page's.
      try {
        this.native.timeout = this.pageTimeout;
      } catch {
        // keep it
      }
    }
  }

  setRequestHeader(name: string, value: string): void {
    if (this.phase === 'emulated') {
      throw this.invalidState("Failed to execute 'setRequestHeader': the object's state must be OPENED.");
    }
    this.native.setRequestHeader(name, value);
    if (this.phase === 'opened') this.headers.push([String(name), String(value)]);
  }

  send(body?: unknown): void {
    if (this.phase === 'emulated')
      throw this.invalidState("Failed to execute 'send': the object's state must be OPENED.");
    if (this.phase !== 'opened') return this.native.send(body);
    let ruling: Ruling;
    try {
      ruling = this.core.decideOrWait(this.facts(body));
    } catch {
      ruling = { now: { intercept: false, media: false, reason: 'not-media' } };
    }
    const d: Decision | undefined = 'now' in ruling ? ruling.now : undefined;
    if (d && !d.intercept) {
      this.phase = 'native';
      return this.native.send(body);
    }
    try {
      if (d) this.startEmulation(d, body);
      else if ('later' in ruling) this.waitForSettings(ruling.later, body);
    } catch {
      const phase = this.phase as Phase; // startEmulation may have changed it
      const e = this.emu;
      if (phase === 'emulated' && e && e.readyState === 1 && !e.pending) {
        this.core.countFallback('internal');
        this.fallBack(e, body);
      }
    }
  }

  abort(): void {
    const e = this.emulation();
    if (!e) return this.native.abort();
    this.gen++;
    this.stopTimer(e);
    e.pending?.cancel();
    if (e.readyState >= 1 && e.readyState <= 3) this.requestError(e, 'abort');
    // DONE → UNSENT with a network-error response (no URL either), without events.
    if (this.emu === e && e.readyState === 4) {
      e.readyState = 0;
      e.response = undefined;
    }
  }

  getResponseHeader(name: string): string | null {
    const e = this.emulation();
    if (!e) return this.native.getResponseHeader(name);
    return this.delivered(e)?.header(name) ?? null;
  }

  getAllResponseHeaders(): string {
    const e = this.emulation();
    if (!e) return this.native.getAllResponseHeaders();
    return this.delivered(e)?.allHeaders() ?? '';
  }

  overrideMimeType(mime: string): void {
    const e = this.emulation();
    if (e && e.readyState >= 3) {
      throw this.invalidState("Failed to execute 'overrideMimeType': the object's state is LOADING or DONE.");
    }
    this.native.overrideMimeType(mime);
    this.mimeOverride = String(mime);
  }

  // ---------------------------------------------------------------------- the page's properties

  get readyState(): number {
    const e = this.emulation();
    return e ? e.readyState : this.native.readyState;
  }

  get status(): number {
    const e = this.emulation();
    return e ? (this.delivered(e)?.status ?? 0) : this.native.status;
  }

  get statusText(): string {
    const e = this.emulation();
    return e ? (this.delivered(e)?.statusText ?? '') : this.native.statusText;
  }

  get responseURL(): string {
    const e = this.emulation();
    return e ? (e.response?.url ?? '') : this.native.responseURL;
  }

  get responseXML(): unknown {
    const e = this.emulation();
    if (!e) return this.native.responseXML;
    const type = this.native.responseType;
    if (type !== '' && type !== 'document') {
      throw this.invalidState(
        "Failed to read 'responseXML': the value is only accessible if responseType is '' or 'document'.",
      );
    }
    return null;
  }

  get responseText(): string {
    const e = this.emulation();
    if (!e) return this.native.responseText;
    const type = this.native.responseType;
    if (type !== '' && type !== 'text') {
      throw this.invalidState(
        `Failed to read 'responseText': the value is only accessible if responseType is '' or 'text' (was '${type}').`,
      );
    }
    return this.loadingText(e);
  }

  get response(): unknown {
    const e = this.emulation();
    if (!e) return this.native.response;
    const type = this.native.responseType;
    if (type === '' || type === 'text') return this.loadingText(e);
    const r = e.readyState === 4 ? this.delivered(e) : undefined;
    if (!r) return null;
    switch (type) {
      case 'arraybuffer':
        return r.body;
      case 'blob':
        return r.asBlob(this.mimeOverride);
      case 'json':
        return r.asJson();
      default:
        return null;
    }
  }

  get responseType(): string {
    return this.native.responseType;
  }

  set responseType(value: string) {
    const e = this.emulation();
    if (e && e.readyState >= 3)
      throw this.invalidState("Failed to set 'responseType': the object's state is LOADING or DONE.");
    this.native.responseType = value;
  }

  get timeout(): number {
    return this.pageTimeout ?? this.native.timeout;
  }

  set timeout(value: number) {
    this.native.timeout = value; // validates (sync requests) and converts
    this.pageTimeout = this.native.timeout;
    const e = this.emulation();
    if (e && e.readyState < 4) this.armTimeout(e);
  }

  // ---------------------------------------------------------------------- native events observed

  /** The native object's readystatechange: a manifest the page loaded from the network is read. */
  onNativeReadyStateChange(): void {
    if (this.phase !== 'native' || this.native.readyState !== 4) return;
    try {
      const status = this.native.status;
      if (status < 200 || status >= 300) return;
      const url = this.native.responseURL || this.url;
      const type = this.native.responseType;
      const contentType = this.native.getResponseHeader('content-type');
      if (type === '' || type === 'text') {
        this.core.observeManifest(url, this.native.responseText);
      } else if (type === 'arraybuffer' && this.core.mightBeManifest(url, contentType)) {
        const buf = this.native.response as ArrayBuffer | null;
        if (buf) this.core.observeManifest(url, new this.g.TextDecoder().decode(buf));
      }
    } catch {
      // observation only
    }
  }

  // ------------------------------------------------------------------------------- emulation

  /** The emulation, when the current request cycle is emulated. */
  private emulation(): Emulation | undefined {
    return this.phase === 'emulated' ? this.emu : undefined;
  }

  /** The response once headers are in (readyState ≥ 2; a network error has none). */
  private delivered(e: Emulation): EmulatedResponse | undefined {
    return e.readyState >= 2 ? e.response : undefined;
  }

  /** responseText while loading and done: the whole body (it arrives at once), '' before. */
  private loadingText(e: Emulation): string {
    const r = e.readyState >= 3 ? this.delivered(e) : undefined;
    return r ? r.asText(this.mimeOverride) : '';
  }

  private isCurrent(e: Emulation, gen: number): boolean {
    return this.gen === gen && this.emu === e;
  }

  private facts(body: unknown): RequestFacts {
    const method = this.method.toUpperCase();
    return {
      api: 'xhr',
      method,
      url: this.url,
      headers: this.headers,
      baseUrl: this.g.baseUrl(),
      pageOrigin: this.g.origin(),
      sync: !this.async,
      withCredentials: this.native.withCredentials,
      hasUserInfo: this.hasUserInfo,
      responseType: this.native.responseType,
      hasBody: body !== undefined && body !== null && method !== 'GET' && method !== 'HEAD',
    };
  }

  /** send() as the page sees it (OPENED, loadstart) for a request the hook answers or holds. */
  private beginEmulation(pending?: Emulation['pending']): { e: Emulation; gen: number } | undefined {
    this.phase = 'emulated';
    const gen = ++this.gen;
    const e: Emulation = { readyState: 1, sentAt: this.g.now(), pending };
    this.emu = e;
    this.events.fireProgress('loadstart', 0, 0, false);
    return this.isCurrent(e, gen) ? { e, gen } : undefined; // aborted or reopened from a loadstart handler
  }

  private startEmulation(d: InterceptDecision, body: unknown): void {
    const begun = this.beginEmulation();
    if (begun) this.serve(begun.e, begun.gen, d, body);
  }

  /**
   * A media request made before the settings came: the page sees it sent (the emulation's
   * timeout and abort() apply) while it waits; then it is served, or sent natively as made.
   */
  private waitForSettings(later: LaterDecision, body: unknown): void {
    const begun = this.beginEmulation(later);
    if (!begun) return; // abort() or open() from a loadstart handler cancelled the wait
    const { e, gen } = begun;
    later.promise.then(
      (d) => {
        if (!this.isCurrent(e, gen)) return;
        if (d.intercept) this.serve(e, gen, d, body);
        else this.fallBack(e, body);
      },
      () => {
        if (!this.isCurrent(e, gen)) return;
        this.core.countFallback('internal');
        this.fallBack(e, body);
      },
    );
    this.armTimeout(e);
  }

  /** Hands the request to the downloader; its answer is delivered, or the request sent natively. */
  private serve(e: Emulation, gen: number, d: InterceptDecision, body: unknown): void {
    const pending = this.core.serve(d);
    e.pending = pending;
    this.armTimeout(e);
    pending.promise.then(
      (outcome) => {
        if (!this.isCurrent(e, gen)) return;
        if (outcome.kind === 'served') {
          try {
            this.deliver(e, d, outcome.answer);
          } catch {
            // a page handler threw: as with native events, that is the page's business
          }
        } else if (outcome.kind === 'fallback') this.fallBack(e, body);
      },
      () => {
        if (!this.isCurrent(e, gen)) return;
        this.core.countFallback('internal');
        this.fallBack(e, body);
      },
    );
  }

  /** The answer arrived whole: headers, loading, done, each with its events. */
  private deliver(e: Emulation, d: InterceptDecision, answer: GetSuccess): void {
    const response = new EmulatedResponse(answer, d.url, this.g);
    const length = response.length;
    e.response = response;
    const gen = this.gen;
    const current = () => this.isCurrent(e, gen);
    e.readyState = 2;
    this.events.fire('readystatechange');
    if (!current()) return;
    e.readyState = 3;
    this.events.fire('readystatechange');
    if (!current()) return;
    this.events.fireProgress('progress', length, length, true);
    if (!current()) return;
    e.readyState = 4;
    this.stopTimer(e);
    this.events.fire('readystatechange');
    if (!current()) return;
    this.events.fireProgress('load', length, length, true);
    if (!current()) return;
    this.events.fireProgress('loadend', length, length, true);
  }

  /** The standard's "request error steps": state DONE, readystatechange, `type`, loadend. */
  private requestError(e: Emulation, type: 'abort' | 'timeout' | 'error'): void {
    this.stopTimer(e);
    e.readyState = 4;
    e.response = undefined;
    const gen = this.gen;
    this.events.fire('readystatechange');
    if (!this.isCurrent(e, gen)) return;
    this.events.fireProgress(type, 0, 0, false);
    if (!this.isCurrent(e, gen)) return;
    this.events.fireProgress('loadend', 0, 0, false);
  }

  /** MUTP did not answer: send the request the page made on the native object, as if nothing happened. */
  private fallBack(e: Emulation, body: unknown): void {
    this.stopTimer(e);
    this.phase = 'native';
    this.emu = undefined;
    const ms = this.timeout;
    if (ms > 0) {
      // The page's timeout counts from its send(): give the native request what is left of it.
      try {
        this.native.timeout = Math.max(1, Math.round(ms - (this.g.now() - e.sentAt)));
      } catch {
        // keep the page's own value
      }
    }
    this.suppressLoadstart = true;
    try {
      this.native.send(body);
    } catch {
      // Should not happen (the native object is OPENED and unsent): end the request as a network error.
      this.phase = 'emulated';
      this.emu = e;
      this.requestError(e, 'error');
    } finally {
      this.suppressLoadstart = false;
    }
  }

  private armTimeout(e: Emulation): void {
    this.stopTimer(e);
    const ms = this.timeout;
    if (!(ms > 0) || e.readyState === 4) return;
    const gen = this.gen;
    e.timer = this.g.setTimeout(
      () => {
        if (!this.isCurrent(e, gen)) return;
        this.gen++;
        e.pending?.cancel();
        this.requestError(e, 'timeout');
      },
      Math.max(0, ms - (this.g.now() - e.sentAt)),
    );
  }

  private stopTimer(e: Emulation): void {
    if (e.timer !== undefined) this.g.clearTimeout(e.timer);
    e.timer = undefined;
  }

  private invalidState(message: string): DOMException {
    return new this.g.DOMException(message, 'InvalidStateError');
  }
}
