/**
 * The proxy's option values: each parser turns one flag's text into its value or refuses it with
 * an InvalidArgumentError that commander reports under the flag's name (exit 2).
 */
import { InvalidArgumentError } from 'commander';
import ipaddr from 'ipaddr.js';
import { SourceEndpoint } from '@mutp/shared';
import { normalizeOrigins } from '@mutp/origin-fetch';
import { byteCount, isLoopbackHost } from '@mutp/cli-options';

/** Bytes: an integer with an optional unit (K, M, G, KiB, MiB, GiB; powers of 1024). */
export const parseBytes = byteCount();

export function portRange(text: string): [number, number] {
  const m = /^(\d+)-(\d+)$/.exec(text.trim());
  if (!m) throw new InvalidArgumentError('expected a-b, e.g. 50000-50100');
  const a = Number(m[1]);
  const b = Number(m[2]);
  if (a < 1 || b > 65535 || a > b) throw new InvalidArgumentError('ports must satisfy 1 <= a <= b <= 65535');
  return [a, b];
}

export function origins(text: string): '*' | string[] {
  const list = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (list.length === 1 && list[0] === '*') return '*';
  if (list.length === 0) throw new InvalidArgumentError('empty list (use * for any public origin)');
  try {
    return normalizeOrigins(list);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
}

export function wsUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidArgumentError('not a URL');
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw new InvalidArgumentError('must be ws:// or wss://');
  return url.href;
}

/** One origo URL, or several comma-separated (instances sharing state): one stays a string. */
export function wsUrls(text: string): string | string[] {
  const list: string[] = [];
  for (const item of text.split(',')) {
    if (item.trim() === '') continue;
    let url: string;
    try {
      url = wsUrl(item.trim());
    } catch (e) {
      throw new InvalidArgumentError(`${JSON.stringify(item.trim())}: ${(e as Error).message}`);
    }
    if (!list.includes(url)) list.push(url);
  }
  if (list.length === 0) throw new InvalidArgumentError('no URL given');
  return list.length === 1 ? list[0] : list;
}

export function ports(text: string): '*' | number[] {
  if (text.trim() === '*') return '*';
  const list = text.split(',').map((p) => Number(p.trim()));
  if (list.length === 0 || list.some((p) => !Number.isInteger(p) || p < 1 || p > 65535))
    throw new InvalidArgumentError('expected * or a comma-separated list of ports, e.g. 80,443');
  return list;
}

export function pageOrigins(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => {
      let url: URL;
      try {
        url = new URL(s);
      } catch {
        throw new InvalidArgumentError(`${JSON.stringify(s)} is not an origin`);
      }
      if (url.origin === 'null' || url.origin !== s.replace(/\/$/, ''))
        throw new InvalidArgumentError(`${JSON.stringify(s)} must be scheme://host[:port] only`);
      return url.origin;
    });
}

/** Plain ws:// only to this machine, unless --insecure: elsewhere a man in the middle could inject clients. */
export function origoUrlProblem(text: string, insecure: boolean): string | undefined {
  const url = new URL(text);
  if (url.protocol !== 'ws:' || insecure) return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isLoopbackHost(host)) return undefined;
  return `plain ws:// to ${host} is refused (use wss://, or --insecure)`;
}

export function quicUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidArgumentError(`${JSON.stringify(text)} is not a URL`);
  }
  if (url.protocol !== 'https:') throw new InvalidArgumentError('a QUIC endpoint URL is https:');
  return url.toString();
}

export function httpUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidArgumentError('not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError('must be http(s)://');
  return url.href.replace(/\/$/, '');
}

/** As signalling's regionName (register.region). */
export function regionName(text: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(text))
    throw new InvalidArgumentError('a region name: letters, digits, . _ -, at most 63');
  return text;
}

/** `--disable-features`: known feature names only, so a typo is not a silent no-op. */
export function featureList(text: string): ReturnType<typeof SourceEndpoint.parseFeatures> {
  try {
    return SourceEndpoint.parseFeatures(text);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
}

/** Signalling's MAX_REGION_PREFIXES (register.prefixes). */
export const MAX_REGION_PREFIXES = 16;

export function regionPrefixes(text: string): string[] {
  const list = text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (list.length > MAX_REGION_PREFIXES) throw new InvalidArgumentError(`at most ${MAX_REGION_PREFIXES} prefixes`);
  for (const prefix of list) {
    try {
      ipaddr.parseCIDR(prefix);
    } catch {
      throw new InvalidArgumentError(`${JSON.stringify(prefix)} is not a CIDR prefix (e.g. 203.0.113.0/24)`);
    }
  }
  return list;
}

export function flag(text: string | undefined): boolean {
  return text === undefined || !/^(0|false|no|off)$/i.test(text);
}
