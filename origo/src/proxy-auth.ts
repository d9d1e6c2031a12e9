/**
 * Who may register as which proxy. Each proxy has its own key (a `--proxy-keys` JSON file
 * `{"<proxyId>": "<key>", ...}`, reloaded on SIGHUP: deleting a line revokes that proxy), so a
 * leaked key exposes one proxy id, never another's. A line may also name the proxy's operator,
 * `"<proxyId>": {"key": "<key>", "operator": "<name>"}`: who runs it, so that offers spread over
 * operators and clients count agreeing operators, not proxies (issue 31, independence). A proxy
 * of no named operator is its own (its id). The shared `--proxy-secret` remains only as
 * an explicitly insecure dev mode: any holder can register under any id not currently live.
 * Also checks the `httpUrl` a proxy advertises: clients fetch it, so it must be a public
 * http(s) URL (loopback and private networks only when origo runs with --allow-local-proxies: a dev
 * cluster or the namespace testbed).
 */
import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { readFileSync, statSync } from 'node:fs';
import ipaddr from 'ipaddr.js';
import { secretsEqual } from '@mutp/cli-options';

/** Minimum length of a per-proxy key (a random 128-bit value in base64 is 22 characters). */
export const MIN_PROXY_KEY_LENGTH = 16;

/**
 * Each proxy id's key, and the operators the file named (`operators`: absent in a plain map, where
 * every proxy is its own operator).
 */
export type ProxyKeys = ReadonlyMap<string, string> & { readonly operators?: ReadonlyMap<string, string> };

/** What a proxy id and an operator name may be: short, printable, no separators of other syntaxes. */
const NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

/** The operator of a proxy as the keys name it: the one named, else the proxy itself. */
export function operatorOf(keys: ProxyKeys | undefined, proxyId: string): string {
  return keys?.operators?.get(proxyId) ?? proxyId;
}

/**
 * Why a file of secrets (proxy keys, the token signing key) is readable by more than its owner,
 * or undefined: group or world read bits give every local account the keys, so origo says so at
 * start and on reload (it still reads them: refusing would take a fleet down over a chmod).
 */
export function keyFileExposure(file: string): string | undefined {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch {
    return undefined; // the read itself reports a missing file
  }
  if ((mode & 0o044) === 0) return undefined;
  const who = (mode & 0o004) !== 0 ? 'every local user' : 'its group';
  return `${file} holds secrets but ${who} can read it (mode ${(mode & 0o777).toString(8)}): chmod 600 it`;
}

export function loadProxyKeys(file: string): ProxyKeys {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: cannot read the proxy keys (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new Error(`${file}: expected a JSON object {"<proxyId>": "<key>"}`);
  }
  const keys = new Map<string, string>();
  const operators = new Map<string, string>();
  for (const [id, line] of Object.entries(json)) {
    if (!NAME.test(id)) throw new Error(`${file}: bad proxy id ${JSON.stringify(id)}`);
    const { key, operator } = keyLine(file, id, line);
    if (typeof key !== 'string' || key.length < MIN_PROXY_KEY_LENGTH) {
      throw new Error(`${file}: the key of ${id} must be a string of at least ${MIN_PROXY_KEY_LENGTH} characters`);
    }
    if (operator !== undefined && (typeof operator !== 'string' || !NAME.test(operator))) {
      throw new Error(`${file}: bad operator of ${id}: ${JSON.stringify(operator)}`);
    }
    keys.set(id, key);
    if (operator !== undefined) operators.set(id, operator);
  }
  return Object.assign(keys, { operators });
}

/** A line's key and operator: `"<key>"` or `{"key": "<key>", "operator": "<name>"}` (nothing else). */
function keyLine(file: string, id: string, line: unknown): { key: unknown; operator?: unknown } {
  if (typeof line !== 'object' || line === null || Array.isArray(line)) return { key: line };
  const unknown = Object.keys(line).filter((field) => field !== 'key' && field !== 'operator');
  if (unknown.length > 0) throw new Error(`${file}: ${id} has unknown fields ${unknown.join(', ')}`);
  return line as { key: unknown; operator?: unknown };
}

export type ProxyAuthResult =
  | {
      ok: true;
      proxyId?: string;
      mayReplace: boolean;
      /** Per-proxy keys only. */
      keyFingerprint?: string;
      /** Its operator (per-proxy keys only: in shared-secret mode each proxy is its own). */
      operator?: string;
    }
  | { ok: false; reason: string };

/**
 * A key's fingerprint (128 bits of its SHA-256, base64url): what revocation records, so a
 * revoked key stays revoked whatever id it is listed under and whatever file lists it later.
 */
export function keyFingerprint(key: string): string {
  return createHash('sha256').update(key).digest().subarray(0, 16).toString('base64url');
}

/**
 * Fingerprints of the keys `previous` listed that `next` no longer lists under the same id
 * (removed, or replaced by a new key): what a reload revokes.
 */
export function removedKeys(previous: ProxyKeys | undefined, next: ProxyKeys): string[] {
  const out: string[] = [];
  for (const [id, key] of previous ?? []) if (next.get(id) !== key) out.push(keyFingerprint(key));
  return out;
}

/**
 * Checks a registration. With per-proxy keys the id is required and the key proves it, so a
 * registration may replace that id's live socket. In shared-secret mode it may not (anyone with
 * the secret could otherwise take over a live proxy).
 */
export function authenticateProxy(
  auth: { keys?: ProxyKeys; sharedSecret?: string },
  proxyId: string | undefined,
  secret: string,
): ProxyAuthResult {
  if (auth.keys !== undefined) {
    const key = proxyId === undefined ? undefined : auth.keys.get(proxyId);
    // Compare against something even for an unknown id, so timing does not tell ids apart.
    const matches = secretsEqual(secret, key ?? '\u0000unknown proxy');
    if (proxyId === undefined || key === undefined || !matches) {
      return { ok: false, reason: 'unknown proxy id or wrong key' };
    }
    return {
      ok: true,
      proxyId,
      mayReplace: true,
      keyFingerprint: keyFingerprint(key),
      operator: operatorOf(auth.keys, proxyId),
    };
  }
  if (auth.sharedSecret !== undefined && secretsEqual(secret, auth.sharedSecret)) {
    return { ok: true, proxyId, mayReplace: false };
  }
  return { ok: false, reason: 'wrong proxy secret' };
}

const PRIVATE_SUFFIXES = ['.localhost', '.local', '.internal', '.intranet', '.lan', '.home.arpa', '.corp'];

/** Undefined when `httpUrl` may be offered to clients, else why not. */
export function httpUrlProblem(httpUrl: string, allowLocal: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(httpUrl);
  } catch {
    return 'not a URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be http: or https:';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.search !== '' || url.hash !== '') return 'must not carry a query or fragment';
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (ipaddr.isValid(host)) {
    let address = ipaddr.parse(host);
    if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
      address = (address as ipaddr.IPv6).toIPv4Address();
    }
    const range = address.range();
    if (range === 'unicast') return undefined;
    if ((range === 'loopback' || range === 'private') && allowLocal) return undefined;
    return `address ${host} is ${range}, not public`;
  }
  if (host === 'localhost' || PRIVATE_SUFFIXES.some((s) => host.endsWith(s))) {
    return allowLocal && (host === 'localhost' || host.endsWith('.localhost')) ? undefined : `${host} is not public`;
  }
  if (!host.includes('.')) return `${host} is a single-label (intranet) name`;
  return undefined;
}

/** Ports below 1024 other than HTTP's and HTTPS's belong to other services (mail, ssh, printers). */
export function httpPortProblem(httpUrl: string, allowLocal: boolean): string | undefined {
  const url = new URL(httpUrl);
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  if (allowLocal || port === 80 || port === 443 || port >= 1024) return undefined;
  return `port ${port} is a privileged port other than 80 and 443`;
}

export type Lookup = (host: string) => Promise<readonly { address: string }[]>;

const systemLookup: Lookup = (host) => lookup(host, { all: true, verbatim: true });

/** How long a registration waits for its name to resolve before taking it unresolved. */
const LOOKUP_TIMEOUT_MS = 2000;

/**
 * Why the name in `httpUrl` is not offered to clients: it resolves (as origo sees it) to a
 * loopback, private or other non-public address, so a registered proxy cannot aim the viewers'
 * browsers at their own networks (issue 31). A name that does not resolve here, or not in time,
 * passes: clients may see another DNS, and a name clients cannot resolve harms nobody. A name
 * that changes its answer later (DNS rebinding) is not caught: docs/security.md.
 */
export async function resolvedHostProblem(
  httpUrl: string,
  allowLocal: boolean,
  resolve: Lookup = systemLookup,
): Promise<string | undefined> {
  const host = new URL(httpUrl).hostname.replace(/^\[|\]$/g, '');
  if (allowLocal || ipaddr.isValid(host)) return undefined; // literals were checked already
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((done) => (timer = setTimeout(() => done(undefined), LOOKUP_TIMEOUT_MS)));
  const addresses = await Promise.race([resolve(host).catch(() => undefined), timeout]).finally(() =>
    clearTimeout(timer),
  );
  for (const { address } of addresses ?? []) {
    const problem = httpUrlProblem(`http://${address.includes(':') ? `[${address}]` : address}/`, false);
    if (problem !== undefined) return `${host} resolves to ${address}: ${problem.replace(/^address \S+ is /, '')}`;
  }
  return undefined;
}

/**
 * Undefined when a proxy's QUIC endpoint URL may be offered to clients, else why not: an https URL
 * on the host its `httpUrl` names (already checked), so a proxy cannot point clients' QUIC
 * handshakes at a host it does not answer for.
 */
export function quicUrlProblem(quicUrl: string, httpUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(quicUrl);
  } catch {
    return 'not a URL';
  }
  if (url.protocol !== 'https:') return 'must be https:';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.search !== '' || url.hash !== '') return 'must not carry a query or fragment';
  if (url.hostname !== new URL(httpUrl).hostname) return `host ${url.hostname} is not the httpUrl's host`;
  return undefined;
}
