/**
 * The interception decision: which page requests the extension serves through MUTP and, for the
 * others, why they go to the network untouched. Pure: the hook gathers the facts of a request
 * (from fetch's arguments or an XHR's open/setRequestHeader/send) and acts on the answer.
 */
import { ByteRangeSpec, MEDIA_FILE_EXTENSIONS, normalizeUrl, parseRangeHeader, pathExtension } from '../common/media';
import { HookConfig } from '../common/messages';
import { SegmentInfo } from './manifest';

export interface RequestFacts {
  api: 'xhr' | 'fetch';
  method: string;
  /** As given by the page (resolved against `baseUrl`). */
  url: string;
  /** Header names in any case. */
  headers: [string, string][];
  baseUrl: string;
  /** The page's origin (same-origin requests send cookies anyway; see `credentials`). */
  pageOrigin: string;
  // XHR
  sync?: boolean;
  withCredentials?: boolean;
  /** open() was given a user name or password. */
  hasUserInfo?: boolean;
  responseType?: string;
  // fetch
  credentials?: string;
  mode?: string;
  integrity?: string;
  cache?: string;
  /** fetch's redirect mode: only 'follow' can be answered (a proxy follows redirects itself). */
  redirect?: string;
  hasBody?: boolean;
}

/** Why a media request was recognised as one. */
export type MediaMatch = 'manifest' | 'range-file' | 'pattern';

export type PassReason =
  | 'not-media'
  | 'not-ready'
  | 'disabled'
  | 'site-disabled'
  | 'scheme'
  | 'method'
  | 'sync'
  | 'credentials'
  | 'authorization'
  | 'headers'
  | 'response-type'
  | 'no-cors'
  | 'same-origin-mode'
  | 'redirect'
  | 'integrity'
  | 'cache-mode'
  | 'multi-range'
  | 'bad-range';

export type Decision =
  | { intercept: true; url: string; match: MediaMatch; range?: ByteRangeSpec; segment?: SegmentInfo }
  | { intercept: false; media: boolean; reason: PassReason; match?: MediaMatch };

export interface DecisionContext {
  config: HookConfig | undefined;
  lookup(url: string): SegmentInfo | undefined;
  patterns: CompiledPatterns;
}

/** Request headers a proxy's anonymous GET can stand in for (anything else may change the answer). */
const REPLAYABLE_HEADERS: ReadonlySet<string> = new Set([
  'accept',
  'accept-language',
  'content-language',
  'range',
  'cache-control',
  'pragma',
]);

/** Header values as a map of lower-case names (a repeated header's values joined by ", " as the browser does). */
export function headerMap(headers: [string, string][]): Map<string, string> {
  const map = new Map<string, string>();
  for (const [name, value] of headers) {
    const key = name.toLowerCase();
    const previous = map.get(key);
    map.set(key, previous === undefined ? value : `${previous}, ${value}`);
  }
  return map;
}

function sameOrigin(url: string, origin: string): boolean {
  try {
    return new URL(url).origin === origin;
  } catch {
    return false;
  }
}

export function decide(facts: RequestFacts, ctx: DecisionContext): Decision {
  const url = normalizeUrl(facts.url, facts.baseUrl);
  if (!url || !/^https?:$/.test(new URL(url).protocol)) return { intercept: false, media: false, reason: 'scheme' };
  const parsedUrl = new URL(url);
  const headers = headerMap(facts.headers);
  const rangeHeader = headers.get('range');

  // 1. Is it a media object at all?
  const segment = ctx.lookup(url);
  let match: MediaMatch | undefined;
  if (segment) match = 'manifest';
  else if (rangeHeader !== undefined && MEDIA_FILE_EXTENSIONS.has(pathExtension(url))) match = 'range-file';
  else if (ctx.patterns.test(url)) match = 'pattern';
  if (!match) return { intercept: false, media: false, reason: 'not-media' };
  const pass = (reason: PassReason): Decision => ({ intercept: false, media: true, reason, match });

  // 2. Is the extension on here? (Without settings yet, the checks below still run: `not-ready`
  // then means that only the settings are missing, and the hook may wait for them: core.ts.)
  const config = ctx.config;
  if (config && !config.enabled) return pass(config.disabledReason ?? 'disabled');

  // 3. Can an anonymous GET from a proxy stand in for it?
  if (facts.method.toUpperCase() !== 'GET' || facts.hasBody) return pass('method');
  if (facts.sync) return pass('sync');
  if (facts.hasUserInfo || facts.withCredentials) return pass('credentials');
  if (parsedUrl.username !== '' || parsedUrl.password !== '') return pass('credentials');
  if (facts.credentials === 'include' && !sameOrigin(url, facts.pageOrigin)) return pass('credentials');
  if (headers.has('authorization')) return pass('authorization');
  for (const name of headers.keys()) if (!REPLAYABLE_HEADERS.has(name)) return pass('headers');
  if (facts.responseType === 'document') return pass('response-type');
  if (facts.mode === 'no-cors' || facts.mode === 'navigate' || facts.mode === 'websocket') return pass('no-cors');
  // The network would refuse these: a served answer would hand the page what it could not read.
  if (facts.mode === 'same-origin' && !sameOrigin(url, facts.pageOrigin)) return pass('same-origin-mode');
  if (facts.redirect !== undefined && facts.redirect !== 'follow') return pass('redirect');
  if (facts.integrity) return pass('integrity');
  if (facts.cache === 'only-if-cached') return pass('cache-mode');

  // 4. Which bytes?
  let range: ByteRangeSpec | undefined;
  if (rangeHeader !== undefined) {
    const parsed = parseRangeHeader(rangeHeader);
    if (!parsed.ok) return pass(parsed.reason);
    range = parsed.range;
  }
  if (!config) return pass('not-ready');
  return range ? { intercept: true, url, match, segment, range } : { intercept: true, url, match, segment };
}

// ----------------------------------------------------------------------------------- patterns

export interface CompiledPatterns {
  readonly source: readonly string[];
  test(url: string): boolean;
}

/**
 * URL patterns from the options: `/regex/flags`, or a glob over the whole URL where `*` matches
 * any run of characters (e.g. the default YouTube-style `videoplayback` pattern). Invalid patterns are ignored.
 */
export function compilePatterns(patterns: readonly string[]): CompiledPatterns {
  const regexes: RegExp[] = [];
  for (const raw of patterns) {
    const p = raw.trim();
    if (!p) continue;
    const literal = /^\/(.+)\/([a-z]*)$/.exec(p);
    try {
      if (literal) regexes.push(new RegExp(literal[1], literal[2].replace(/[gy]/g, '')));
      else regexes.push(new RegExp(`^${p.split('*').map(escapeRegExp).join('.*')}$`));
    } catch {
      // an invalid regular expression matches nothing
    }
  }
  return {
    source: [...patterns],
    test: (url: string) => regexes.some((r) => r.test(url)),
  };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
}
