/**
 * The part of Content Security Policy Level 3 the extension needs to stay within the page's
 * `connect-src`: parsing a serialized policy, and whether a URL matches a directive's source list
 * (the spec's "Does url match source list in origin with redirect count", redirect count 0). Pure:
 * the content script decides with it whether a fetch the page asked for may go to the proxies.
 *
 * Where this reading and a browser's could differ, it errs towards "does not match": a URL
 * wrongly refused here only goes to the network, where the browser applies the policy itself.
 */

/** One policy: directive names (lower case) to their source lists, the first of a repeated name kept. */
export type CspPolicy = ReadonlyMap<string, readonly string[]>;

/** Longest serialized policy read; a longer one is cut (its tail cannot widen what the head allows). */
export const MAX_POLICY_CHARS = 16_384;
/** Most source expressions of one directive that are looked at. */
const MAX_SOURCES = 256;

const DIRECTIVE_NAME = /^[a-z0-9-]+$/i;

/**
 * "Parse a serialized CSP": directives split on `;`, names case-insensitive, the first of a
 * repeated directive wins, a token with non-ASCII characters is skipped.
 */
export function parsePolicy(serialized: string): CspPolicy {
  const policy = new Map<string, readonly string[]>();
  for (const raw of serialized.slice(0, MAX_POLICY_CHARS).split(';')) {
    const token = raw.trim();
    // eslint-disable-next-line no-control-regex
    if (token === '' || /[^\x00-\x7f]/.test(token)) continue;
    const [name, ...values] = token.split(/[\t\n\f\r ]+/);
    if (!DIRECTIVE_NAME.test(name)) continue;
    const key = name.toLowerCase();
    if (!policy.has(key)) policy.set(key, values.slice(0, MAX_SOURCES));
  }
  return policy;
}

/**
 * The policies a `<meta http-equiv=Content-Security-Policy>` content may stand for. The spec reads
 * it as one policy; a comma also separates policies in a header, and a browser that read it that
 * way would enforce each part. Both readings are returned, so a URL is let through only when
 * every reading allows it.
 */
export function parseMetaPolicies(content: string): CspPolicy[] {
  const whole = content.slice(0, MAX_POLICY_CHARS);
  const readings = [parsePolicy(whole)];
  if (whole.includes(',')) for (const part of whole.split(',')) readings.push(parsePolicy(part));
  return readings;
}

/** The source list that governs a page's fetch/XHR: `connect-src`, else `default-src`, else none. */
export function connectSources(policy: CspPolicy): readonly string[] | undefined {
  return policy.get('connect-src') ?? policy.get('default-src');
}

/** True when `policy` lets a page at `self` fetch `url` (an absolute http(s) URL). */
export function policyAllowsConnect(policy: CspPolicy, url: URL, self: URL): boolean {
  const sources = connectSources(policy);
  return sources === undefined || sourceListMatches(sources, url, self);
}

/** "Does url match source list": empty or a lone 'none' matches nothing. */
export function sourceListMatches(sources: readonly string[], url: URL, self: URL): boolean {
  if (sources.length === 0) return false;
  if (sources.length === 1 && sources[0].toLowerCase() === "'none'") return false;
  return sources.some((expression) => expressionMatches(expression, url, self));
}

const SCHEME_SOURCE = /^([a-z][a-z0-9+.-]*):$/i;
// host-source = [ scheme-part "://" ] host-part [ ":" port-part ] [ path-part ]
const HOST_SOURCE =
  /^(?:([a-z][a-z0-9+.-]*):\/\/)?(\*|(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*\.?)(?::(\d+|\*))?(\/[^?#]*)?$/i;

function expressionMatches(expression: string, url: URL, self: URL): boolean {
  const urlScheme = schemeOf(url);
  if (expression === '*') return urlScheme === 'http' || urlScheme === 'https' || urlScheme === schemeOf(self);
  if (expression.toLowerCase() === "'self'") return selfMatches(url, self);
  const scheme = SCHEME_SOURCE.exec(expression);
  if (scheme) return schemePartMatches(scheme[1].toLowerCase(), urlScheme);
  const host = HOST_SOURCE.exec(expression);
  if (!host) return false; // nonces, hashes, 'unsafe-*', 'strict-dynamic', garbage: never a URL
  const [, schemePart, hostPart, portPart, pathPart] = host;
  if (url.hostname === '') return false;
  if (schemePart === undefined) {
    if (!schemePartMatches(schemeOf(self), urlScheme)) return false;
  } else if (!schemePartMatches(schemePart.toLowerCase(), urlScheme)) return false;
  if (!hostPartMatches(hostPart, url.hostname)) return false;
  if (!portPartMatches(portPart, url)) return false;
  return pathPart === undefined || pathPartMatches(pathPart, url.pathname);
}

function schemeOf(url: URL): string {
  return url.protocol.slice(0, -1).toLowerCase();
}

/** A scheme in a policy also admits its secure upgrade (http: → https:, ws: → wss:). */
function schemePartMatches(expression: string, urlScheme: string): boolean {
  if (expression === urlScheme) return true;
  return (expression === 'http' && urlScheme === 'https') || (expression === 'ws' && urlScheme === 'wss');
}

function hostPartMatches(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase();
  const h = host.toLowerCase();
  if (p === '*') return true;
  // `*.example.com` is the subdomains only, not example.com itself.
  if (p.startsWith('*.')) return h.endsWith(p.slice(1));
  return p === h;
}

const DEFAULT_PORTS: Readonly<Record<string, string>> = { http: '80', https: '443', ws: '80', wss: '443' };

/** The URL's port, the scheme's default when it names none. */
function effectivePort(url: URL): string {
  return url.port !== '' ? url.port : (DEFAULT_PORTS[schemeOf(url)] ?? '');
}

function portPartMatches(port: string | undefined, url: URL): boolean {
  if (port === '*') return true;
  // No port in the expression: only the URL scheme's default port.
  if (port === undefined) return url.port === '';
  return String(Number(port)) === effectivePort(url);
}

/** A path ending in `/` is a prefix of whole segments; any other path must match exactly. */
function pathPartMatches(pattern: string, path: string): boolean {
  if (pattern === '' || pattern === '/') return true;
  const exact = !pattern.endsWith('/');
  const want = pattern.split('/');
  const got = path.split('/');
  if (exact ? want.length !== got.length : want.length > got.length) return false;
  if (!exact) want.pop(); // the empty piece after the trailing slash
  return want.every((piece, i) => {
    const a = safeDecode(piece);
    return a !== undefined && a === safeDecode(got[i]);
  });
}

/** A piece percent-decoded, or undefined for a malformed escape (which then matches nothing). */
function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/**
 * 'self': the page's origin, and its secure upgrade (an http page's 'self' admits https on the
 * same host and default ports).
 */
function selfMatches(url: URL, self: URL): boolean {
  if (url.origin === self.origin && self.origin !== 'null') return true;
  if (url.hostname === '' || url.hostname.toLowerCase() !== self.hostname.toLowerCase()) return false;
  const bothDefault = url.port === '' && self.port === '';
  if (!bothDefault && effectivePort(url) !== effectivePort(self)) return false;
  const from = schemeOf(self);
  const to = schemeOf(url);
  return to === 'https' || to === 'wss' || (from === 'http' && (to === 'http' || to === 'ws'));
}
