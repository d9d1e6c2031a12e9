/**
 * The page's XMLHttpRequest, wrapped. Instances are real XHRs (a subclass of the page's own
 * constructor); each one is run by an XhrRequest (xhr-request.ts), which reaches the native object
 * through the members captured here before any page script could patch the prototype. Event
 * handler properties (onload, ...) fire for the emulated events as for native ones, since both are
 * dispatched on the object itself.
 */
import { HookCore } from './core';
import { PageGlobals } from './globals';
import { NativeXhr, XhrEvents, XhrRequest } from './xhr-request';

function descriptor(proto: object, name: string): PropertyDescriptor {
  for (let p: object | null = proto; p; p = Object.getPrototypeOf(p)) {
    const d = Object.getOwnPropertyDescriptor(p, name);
    if (d) return d;
  }
  throw new Error(`XMLHttpRequest.${name} not found`);
}

/** The page's methods XhrRequest answers; on objects it does not run, the native ones do. */
const METHODS = [
  'open',
  'setRequestHeader',
  'send',
  'abort',
  'getResponseHeader',
  'getAllResponseHeaders',
  'overrideMimeType',
] as const;
const READ_ONLY = [
  'readyState',
  'status',
  'statusText',
  'responseURL',
  'response',
  'responseText',
  'responseXML',
] as const;
const READ_WRITE = ['responseType', 'timeout'] as const;

type Method = (typeof METHODS)[number];
type Property = (typeof READ_ONLY)[number] | (typeof READ_WRITE)[number] | 'withCredentials';
type Fn = (...args: unknown[]) => unknown;

/** The native members of XMLHttpRequest.prototype, captured once. */
class NativeMembers {
  readonly methods = {} as Record<Method, Fn>;
  readonly properties = {} as Record<Property, PropertyDescriptor>;

  constructor(proto: XMLHttpRequest) {
    for (const name of METHODS) this.methods[name] = proto[name] as Fn;
    for (const name of [...READ_ONLY, ...READ_WRITE, 'withCredentials'] as const) {
      this.properties[name] = descriptor(proto, name);
    }
  }

  get(x: XMLHttpRequest, name: Property): unknown {
    return this.properties[name].get!.call(x);
  }

  set(x: XMLHttpRequest, name: (typeof READ_WRITE)[number], value: unknown): void {
    this.properties[name].set!.call(x, value);
  }
}

/** The native object as XhrRequest sees it. */
class BoundNativeXhr implements NativeXhr {
  constructor(
    private readonly x: XMLHttpRequest,
    private readonly n: NativeMembers,
  ) {}
  open(args: unknown[]): void {
    this.n.methods.open.apply(this.x, args);
  }
  send(body: unknown): void {
    this.n.methods.send.call(this.x, body);
  }
  abort(): void {
    this.n.methods.abort.call(this.x);
  }
  setRequestHeader(name: string, value: string): void {
    this.n.methods.setRequestHeader.call(this.x, name, value);
  }
  getResponseHeader(name: string): string | null {
    return this.n.methods.getResponseHeader.call(this.x, name) as string | null;
  }
  getAllResponseHeaders(): string {
    return this.n.methods.getAllResponseHeaders.call(this.x) as string;
  }
  overrideMimeType(mime: string): void {
    this.n.methods.overrideMimeType.call(this.x, mime);
  }
  get readyState(): number {
    return this.n.get(this.x, 'readyState') as number;
  }
  get status(): number {
    return this.n.get(this.x, 'status') as number;
  }
  get statusText(): string {
    return this.n.get(this.x, 'statusText') as string;
  }
  get responseURL(): string {
    return this.n.get(this.x, 'responseURL') as string;
  }
  get response(): unknown {
    return this.n.get(this.x, 'response');
  }
  get responseText(): string {
    return this.n.get(this.x, 'responseText') as string;
  }
  get responseXML(): unknown {
    return this.n.get(this.x, 'responseXML');
  }
  get withCredentials(): boolean {
    return this.n.get(this.x, 'withCredentials') as boolean;
  }
  get responseType(): string {
    return this.n.get(this.x, 'responseType') as string;
  }
  set responseType(value: string) {
    this.n.set(this.x, 'responseType', value);
  }
  get timeout(): number {
    return this.n.get(this.x, 'timeout') as number;
  }
  set timeout(value: number) {
    this.n.set(this.x, 'timeout', value);
  }
}

/** Events dispatched on the page's object with the constructors captured at document_start. */
function eventsOn(x: XMLHttpRequest, g: PageGlobals): XhrEvents {
  return {
    fire: (type) => g.dispatchEvent.call(x, new g.Event(type)),
    fireProgress: (type, loaded, total, lengthComputable) =>
      g.dispatchEvent.call(x, new g.ProgressEvent(type, { lengthComputable, loaded, total })),
  };
}

/** Returns the subclass that replaces `window.XMLHttpRequest`. */
export function createXhrClass(core: HookCore, g: PageGlobals): typeof XMLHttpRequest {
  const Native = g.XMLHttpRequest;
  const native = new NativeMembers(Native.prototype);
  const requests = new WeakMap<object, XhrRequest>();

  class HookedXMLHttpRequest extends Native {
    constructor() {
      super();
      const request = new XhrRequest(new BoundNativeXhr(this, native), eventsOn(this, g), core, g);
      requests.set(this, request);
      // Registered before anything the page adds, so these run first.
      g.addEventListener.call(this, 'loadstart', (event) => {
        if (request.suppressesNativeLoadstart) event.stopImmediatePropagation();
      });
      g.addEventListener.call(this, 'readystatechange', () => request.onNativeReadyStateChange());
    }
  }
  const P = HookedXMLHttpRequest.prototype;

  for (const name of METHODS) {
    const nativeMethod = native.methods[name];
    const method = function (this: XMLHttpRequest, ...args: unknown[]): unknown {
      const request = requests.get(this);
      if (!request) return nativeMethod.apply(this, args);
      return (request[name] as Fn).apply(request, args);
    };
    // Named and sized like the native method, as pages (and fingerprinting scripts) see it.
    Object.defineProperty(method, 'name', { value: name });
    Object.defineProperty(method, 'length', { value: nativeMethod.length });
    Object.defineProperty(P, name, { value: method, writable: true, enumerable: true, configurable: true });
  }
  for (const name of READ_ONLY) {
    Object.defineProperty(P, name, {
      get(this: XMLHttpRequest) {
        const request = requests.get(this);
        return request ? request[name] : native.get(this, name);
      },
      enumerable: true,
      configurable: true,
    });
  }
  for (const name of READ_WRITE) {
    Object.defineProperty(P, name, {
      get(this: XMLHttpRequest) {
        const request = requests.get(this);
        return request ? request[name] : native.get(this, name);
      },
      set(this: XMLHttpRequest, value: never) {
        const request = requests.get(this);
        if (request) request[name] = value;
        else native.set(this, name, value);
      },
      enumerable: true,
      configurable: true,
    });
  }

  Object.defineProperty(HookedXMLHttpRequest, 'name', { value: 'XMLHttpRequest' });
  return HookedXMLHttpRequest;
}
