/**
 * The response of an emulated XMLHttpRequest, made from the downloader's answer: status line,
 * the headers a player reads, and the body in each form `responseType` asks for (decoded once).
 */
import { GetSuccess } from '../common/messages';

const STATUS_TEXT: Record<number, string> = { 200: 'OK', 206: 'Partial Content' };

/** The page-world constructors the body conversions use (captured at document_start). */
export interface BodyGlobals {
  TextDecoder: typeof TextDecoder;
  Blob: typeof Blob;
}

export class EmulatedResponse {
  readonly status: number;
  readonly statusText: string;
  readonly contentType: string;
  /** Lower-case name → value, sorted by name (getAllResponseHeaders' order). */
  readonly headers: readonly [string, string][];
  readonly body: ArrayBuffer;
  private text?: string;
  private json?: { value: unknown };
  private blob?: Blob;

  constructor(
    answer: GetSuccess,
    /** The URL the page asked for (the response's URL: proxies follow redirects themselves). */
    readonly url: string,
    private readonly globals: BodyGlobals,
  ) {
    this.body = answer.body;
    this.status = answer.status;
    this.statusText = STATUS_TEXT[answer.status] ?? '';
    this.contentType = answer.contentType;
    const headers: [string, string][] = [
      ['content-length', String(this.body.byteLength)],
      ['content-type', answer.contentType],
    ];
    if (answer.status === 206 && answer.contentRange) headers.push(['content-range', answer.contentRange]);
    this.headers = headers.sort((p, q) => (p[0] < q[0] ? -1 : 1));
  }

  get length(): number {
    return this.body.byteLength;
  }

  header(name: string): string | null {
    const key = String(name).toLowerCase();
    return this.headers.find(([n]) => n === key)?.[1] ?? null;
  }

  allHeaders(): string {
    return this.headers.map(([n, v]) => `${n}: ${v}\r\n`).join('');
  }

  /** The body as text, in the charset of the (overridden) MIME type; UTF-8 when none or unknown. */
  asText(mimeOverride: string | undefined): string {
    if (this.text !== undefined) return this.text;
    const type = mimeOverride ?? this.contentType;
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(type)?.[1];
    let decoder: TextDecoder;
    try {
      decoder = new this.globals.TextDecoder(charset ?? 'utf-8');
    } catch {
      decoder = new this.globals.TextDecoder('utf-8');
    }
    this.text = decoder.decode(this.body);
    return this.text;
  }

  asBlob(mimeOverride: string | undefined): Blob {
    return (this.blob ??= new this.globals.Blob([this.body], { type: mimeOverride ?? this.contentType }));
  }

  /** The body parsed as UTF-8 JSON; null when it is not JSON (as XHR does). */
  asJson(): unknown {
    if (!this.json) {
      try {
        this.json = { value: JSON.parse(new this.globals.TextDecoder('utf-8').decode(this.body)) };
      } catch {
        this.json = { value: null };
      }
    }
    return this.json.value;
  }
}
