/**
 * The origin-shielding options of the proxy (docs/deploy.md "Origin shielding"), off unless set:
 * `--shield-port` makes the proxy a parent (it answers fleet proxies' requests on that port),
 * `--shield-parent` makes it a child of the parent at that URL; both need the fleet's shield key.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { integer } from '@mutp/cli-options';
import { MIN_SHIELD_KEY_CHARS } from './shield-auth';
import { DEFAULT_SHIELD_SAMPLE_FRACTION, DEFAULT_SHIELD_SAMPLES, DEFAULT_SHIELD_TIMEOUT_MS } from './shield-fetch';

export interface ShieldConfig {
  /** The fleet's shield key (children sign their requests with it, the parent checks them). */
  key: string;
  /** Be a child: the parent's shield endpoint (http(s)://host:port). */
  parentUrl?: string;
  /** Be a parent: the port of the shield endpoint (0 = any free one) and its bind address. */
  port?: number;
  host?: string;
  /** The parent's whole answer must arrive within this long, else the child asks the origin. */
  timeoutMs: number;
  /** Fraction of an object's bytes a child samples from the origin (without Repr-Digest). */
  sampleFraction: number;
  /** Ranges those bytes are split into. */
  samples: number;
  /** As a parent: requests under way per child, and in all. */
  maxPerChild: number;
  maxConcurrent: number;
  /** As a parent: bytes served per child per minute. */
  childBytesPerMinute: number;
}

export const SHIELD_DEFAULTS = {
  timeoutMs: DEFAULT_SHIELD_TIMEOUT_MS,
  sampleFraction: DEFAULT_SHIELD_SAMPLE_FRACTION,
  samples: DEFAULT_SHIELD_SAMPLES,
  maxPerChild: 32,
  maxConcurrent: 128,
  childBytesPerMinute: 8 * 1024 ** 3,
};

function parentUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidArgumentError('expected an http(s) URL, e.g. http://10.0.0.5:8801');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError('expected http: or https:');
  return url.origin;
}

function fraction(text: string): number {
  const x = Number(text);
  if (!(x > 0 && x <= 0.5)) throw new InvalidArgumentError('a fraction above 0, at most 0.5');
  return x;
}

/** Adds the shield options to the proxy's command. */
export function addShieldOptions(command: Command): Command {
  const d = SHIELD_DEFAULTS;
  return command
    .addOption(
      new Option(
        '--shield-parent <url>',
        "origin shielding: fetch missed objects from this parent proxy's shield endpoint (checked against the origin; the origin when it fails or lies)",
      )
        .env('MUTP_PROXY_SHIELD_PARENT')
        .argParser(parentUrl),
    )
    .addOption(
      new Option('--shield-port <n>', 'origin shielding: be a parent, answering fleet proxies on this port (0 = any)')
        .env('MUTP_PROXY_SHIELD_PORT')
        .argParser(integer(0, 65535)),
    )
    .addOption(
      new Option('--shield-host <address>', 'bind address of the shield endpoint (default: --http-host)').env(
        'MUTP_PROXY_SHIELD_HOST',
      ),
    )
    .addOption(
      new Option(
        '--shield-key <key>',
        `the fleet's shield key, at least ${MIN_SHIELD_KEY_CHARS} characters (better from the environment)`,
      ).env('MUTP_PROXY_SHIELD_KEY'),
    )
    .addOption(
      new Option('--shield-timeout-ms <ms>', "a child asks the origin when the parent's answer takes longer")
        .env('MUTP_PROXY_SHIELD_TIMEOUT_MS')
        .argParser(integer(1, 600_000))
        .default(d.timeoutMs),
    )
    .addOption(
      new Option(
        '--shield-sample-fraction <x>',
        "fraction of each object's bytes a child compares with the origin's (when the origin sends no Repr-Digest)",
      )
        .env('MUTP_PROXY_SHIELD_SAMPLE_FRACTION')
        .argParser(fraction)
        .default(d.sampleFraction),
    )
    .addOption(
      new Option('--shield-samples <n>', 'ranges those sampled bytes are split into, chosen at random')
        .env('MUTP_PROXY_SHIELD_SAMPLES')
        .argParser(integer(1, 64))
        .default(d.samples),
    )
    .addOption(
      new Option('--shield-max-per-child <n>', 'as a parent: requests under way per child proxy')
        .env('MUTP_PROXY_SHIELD_MAX_PER_CHILD')
        .argParser(integer(1, 10_000))
        .default(d.maxPerChild),
    )
    .addOption(
      new Option('--shield-max-concurrent <n>', 'as a parent: requests under way from all children')
        .env('MUTP_PROXY_SHIELD_MAX_CONCURRENT')
        .argParser(integer(1, 100_000))
        .default(d.maxConcurrent),
    )
    .addOption(
      new Option('--shield-child-bytes-per-minute <n>', 'as a parent: bytes served to one child per minute')
        .env('MUTP_PROXY_SHIELD_CHILD_BYTES_PER_MINUTE')
        .argParser(integer(1, Number.MAX_SAFE_INTEGER))
        .default(d.childBytesPerMinute),
    );
}

/** The shield part of the parsed options: undefined when shielding is off; a usage error string when wrong. */
export function shieldConfig(o: Record<string, unknown>): ShieldConfig | string | undefined {
  const parent = o.shieldParent as string | undefined;
  const port = o.shieldPort as number | undefined;
  if (parent === undefined && port === undefined) return undefined;
  const key = o.shieldKey as string | undefined;
  if (key === undefined || key.length < MIN_SHIELD_KEY_CHARS)
    return `--shield-parent and --shield-port need --shield-key (MUTP_PROXY_SHIELD_KEY) of at least ${MIN_SHIELD_KEY_CHARS} characters`;
  return {
    key,
    ...(parent !== undefined ? { parentUrl: parent } : {}),
    ...(port !== undefined ? { port } : {}),
    ...(o.shieldHost !== undefined ? { host: o.shieldHost as string } : {}),
    timeoutMs: o.shieldTimeoutMs as number,
    sampleFraction: o.shieldSampleFraction as number,
    samples: o.shieldSamples as number,
    maxPerChild: o.shieldMaxPerChild as number,
    maxConcurrent: o.shieldMaxConcurrent as number,
    childBytesPerMinute: o.shieldChildBytesPerMinute as number,
  };
}
