#!/usr/bin/env -S node --enable-source-maps --conditions=mutp-compiled
/**
 * `mutp get <url>... [-i FILE] [-o file | -d dir] [-c] --mode http|uncoded|rlnc|fountain --proxies N --origo <url>[,<url>...]`:
 * downloads through origo and N proxies to files, each in ranges, resumable, with progress bars,
 * then time, goodput, normalized goodput and per-proxy shares (get-command.ts). `mutp playlist`:
 * a series of segments through one proxy set, staged ahead. Several origo URLs are instances of
 * one deployment: the client starts at a random one and moves to the next if it fails.
 *
 * Exit codes (exit-codes.ts): 0 done and verified; 1 a download failed; 2 bad usage; 3 origo
 * unreachable or no proxy available; 4 cancelled (SIGINT) or timed out.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { byteCount, integer } from '@mutp/cli-options';
import { ByteRange, Feature, MAX_OBJECT_BYTES, MAX_SOURCES, parseFeatureList, rangeProblem } from '@mutp/shared';
import { downloadSeries, MutpClient, origoUrlProblem, SegmentRef, TransportPreference } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { parseChecksum } from './checksum';
import { EXIT, exitCodeOf } from './exit-codes';
import { formatSeries } from './format';
import { GetFlags, planDownloads, runDownloads, UsageError } from './get-command';
import { createNodeHost } from './node-host';
import { parsePlaylist, PlaylistError } from './playlist';

/** Ranges of 8 MiB: a few times that in memory whatever the object's size, and at most that fetched again after an interruption. */
const DEFAULT_CHUNK_BYTES = 8 * 1024 * 1024;

/**
 * Look-ahead bound: a proxy stages at most 4 hints per client at once (its --max-staging-per-client
 * default), and each staged range sits in its cache until asked for.
 */
const MAX_PREFETCH_RANGES = 4;

/** `a-b` (inclusive, as in an HTTP Range header) to the range the proxies fetch. */
function byteRange(v: string): ByteRange {
  const m = /^(\d{1,16})-(\d{1,16})$/.exec(v.trim());
  if (!m) throw new InvalidArgumentError('expected first-last byte offsets, e.g. 0-1048575');
  const start = Number(m[1]);
  const end = Number(m[2]);
  if (end < start) throw new InvalidArgumentError('the last byte comes before the first');
  const range = { start, length: end - start + 1 };
  const problem = rangeProblem(range);
  if (problem) throw new InvalidArgumentError(problem);
  return range;
}

const program = new Command()
  .name('mutp')
  .description('Multi-source downloads through origo and MUTP edge proxies.')
  .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : EXIT.usage));

/** The options every download command takes: mode, proxies and origo. */
function downloadCommand(name: string): Command {
  return program
    .command(name)
    .addOption(
      new Option('--mode <mode>', 'download mode').choices(['http', 'uncoded', 'rlnc', 'fountain']).default('rlnc'),
    )
    .option('--proxies <n>', 'number of proxies', integer(1, MAX_SOURCES), 4)
    .option(
      '--origo <urls>',
      "origo's client endpoint; several origo instances comma-separated",
      process.env.MUTP_ORIGO_CLIENT_URL ?? 'ws://127.0.0.1:8700/v1/client',
    )
    .option(
      '--insecure',
      'accept a plain ws:// origo on a non-loopback host (a man in the middle could inject proxies)',
    )
    .addOption(
      new Option(
        '--transport <kind>',
        'proxy links: auto = QUIC where a proxy offers it, WebRTC after 1 s or a QUIC failure; quic; webrtc',
      )
        .choices(['auto', 'quic', 'webrtc'])
        .default('auto'),
    )
    .option(
      '--quic-ca-file <path>',
      "extra root certificates (PEM) for proxies whose QUIC endpoint has a CA's certificate, besides the system's (a private CA)",
    )
    .option(
      '--region <name>',
      "the region you are in, as origo's proxies name theirs: a hint origo follows only when your address is in none of their prefixes",
      regionHint,
    )
    .option(
      '--disable-features <list>',
      'optional MUTP features to leave off, comma-separated (as a client one release behind: for tests and rolling upgrades)',
      featureList,
    );
}

/** The syntax of signalling's region names: a typo is refused here, not ignored by origo. */
function regionHint(text: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(text))
    throw new InvalidArgumentError('a region name: letters, digits, . _ -, at most 63');
  return text;
}

/** Known feature names only, so a typo is not a silent no-op. */
function featureList(text: string): Feature[] {
  try {
    return parseFeatureList(text);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
}

/** The Node host, trusting `--quic-ca-file`'s roots besides the system's for CA-certified QUIC endpoints. */
function nodeHost(flags: { quicCaFile?: string }) {
  if (flags.quicCaFile === undefined) return createNodeHost();
  try {
    return createNodeHost({}, { extraRootCertificatesPem: readFileSync(flags.quicCaFile, 'utf8') });
  } catch (e) {
    return program.error(`mutp: --quic-ca-file: ${(e as Error).message}`, { exitCode: EXIT.usage });
  }
}

/** What the common flags configure in the client. */
function declared(flags: { region?: string; disableFeatures?: Feature[] }): {
  region?: string;
  disabledFeatures?: Feature[];
} {
  return {
    ...(flags.region !== undefined ? { region: flags.region } : {}),
    ...(flags.disableFeatures !== undefined ? { disabledFeatures: flags.disableFeatures } : {}),
  };
}

downloadCommand('get')
  .description('download objects through N proxies to files, in ranges, resumable')
  .argument('[urls...]', 'object URLs (http or https), fetched by the proxies from their origins')
  .addOption(new Option('--scheduler <name>', 'sender scheduler').choices(['random', 'rarest', 'partitioned']))
  .option(
    '-i, --input-file <file>',
    'download the URLs in this file (one per line; out= and checksum= lines under one)',
  )
  .option('-o, --output <file>', "save as this file (default: the URL's base name); - writes to stdout")
  .option('-d, --dir <dir>', 'save into this directory (created if missing)', undefined)
  .option('-c, --continue', 'resume an interrupted download (its .part and .mutp files)')
  .option('--allow-overwrite', 'replace an existing file (or an interrupted download of it)')
  .option('-j, --max-concurrent-downloads <n>', 'downloads at once (with several URLs)', integer(1, 16), 2)
  .option(
    '--chunk-size <bytes>',
    "largest range fetched at once: the memory a download holds (e.g. 8MiB; at most the proxies' --max-object-bytes)",
    byteCount(64 * 1024, MAX_OBJECT_BYTES),
    DEFAULT_CHUNK_BYTES,
  )
  .option(
    '--prefetch-ranges <n>',
    'ranges staged at the proxies ahead of the one downloaded, so their origin fetches overlap it (0 = none)',
    integer(0, MAX_PREFETCH_RANGES),
    2,
  )
  .option(
    '--max-tries <n>',
    'tries per range when a failure can be mended by trying again (1 = no retry)',
    integer(1, 100),
    5,
  )
  .option('--checksum <sha-256=hex>', "the saved file's SHA-256 (checked before it takes its name)", parseChecksum)
  .option('--range <first-last>', 'only these bytes of the object (inclusive offsets, as in HTTP Range)', byteRange)
  .option('--timeout <ms>', 'give up on a download that makes no progress for this long', integer(1), 120_000)
  .option('--no-progress', 'no progress bars')
  .option('--json', 'print the result as JSON on the last line of stdout')
  .action(get);

downloadCommand('playlist')
  .description(
    'download a series of segments in play order through one proxy set, staging upcoming ones at the proxies (SoftStage)',
  )
  .argument('<playlist>', 'an HLS media playlist (URL or file), or a file of segment URLs one per line')
  .option('--no-stage', 'fetch every segment on demand (no staging hints)')
  .option('--output-dir <dir>', 'write each segment to this directory (as 00000.seg, 00001.seg, ...)')
  .option('--timeout <ms>', 'give up on the whole series after this long', integer(1), 600_000)
  .option('--json', 'print the result as JSON on the last line of stdout')
  .action(playlist);

/** The --origo list, each URL checked (exits with a usage error). */
function origoUrlsFrom(flags: { origo: string; insecure?: boolean }): string[] {
  const origoUrls = flags.origo
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  if (origoUrls.length === 0) program.error('--origo: no URL given', { exitCode: EXIT.usage });
  for (const origoUrl of origoUrls) {
    const origoProblem = origoUrlProblem(origoUrl, flags.insecure === true);
    if (origoProblem !== undefined) program.error(`--origo: ${origoProblem}`, { exitCode: EXIT.usage });
  }
  return origoUrls;
}

async function get(
  urls: string[],
  flags: GetFlags & {
    origo: string;
    insecure?: boolean;
    transport: TransportPreference;
    quicCaFile?: string;
    region?: string;
    disableFeatures?: Feature[];
  },
) {
  const planned = (() => {
    try {
      return planDownloads(urls, flags);
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      return program.error(`mutp: ${e.message}`, { exitCode: EXIT.usage });
    }
  })();
  const origoUrls = origoUrlsFrom(flags);
  const codecs = await loadNodeCodecs();
  const client = new MutpClient(nodeHost(flags), {
    origoUrls,
    codecs,
    insecureOrigo: flags.insecure === true,
    transport: flags.transport,
    ...declared(flags),
  });
  const interrupt = new AbortController();
  process.once('SIGINT', () => interrupt.abort());
  let code: number = EXIT.failed;
  try {
    code = await runDownloads(client, planned, flags, interrupt.signal);
  } finally {
    client.close();
    releaseNodeRtc();
  }
  process.exit(code);
}

interface PlaylistFlags {
  mode: 'http' | 'uncoded' | 'rlnc' | 'fountain';
  proxies: number;
  origo: string;
  insecure?: boolean;
  transport: TransportPreference;
  quicCaFile?: string;
  region?: string;
  disableFeatures?: Feature[];
  stage: boolean;
  outputDir?: string;
  timeout: number;
  json?: boolean;
}

/** Largest playlist read (a VOD playlist of 100,000 segments is a few MB). */
const MAX_PLAYLIST_BYTES = 8 << 20;

async function readPlaylist(source: string): Promise<SegmentRef[]> {
  if (/^https?:\/\//i.test(source)) {
    const response = await fetch(source, { signal: AbortSignal.timeout(15_000) });
    if (!response.ok) throw new PlaylistError(`${source}: HTTP ${response.status}`);
    const text = await response.text();
    if (text.length > MAX_PLAYLIST_BYTES) throw new PlaylistError(`${source}: larger than ${MAX_PLAYLIST_BYTES} bytes`);
    return parsePlaylist(text, response.url || source);
  }
  if (statSync(source).size > MAX_PLAYLIST_BYTES)
    throw new PlaylistError(`${source}: larger than ${MAX_PLAYLIST_BYTES} bytes`);
  return parsePlaylist(readFileSync(source, 'utf8'));
}

async function playlist(source: string, flags: PlaylistFlags): Promise<void> {
  const origoUrls = origoUrlsFrom(flags);
  const segments = await readPlaylist(source).catch((e: unknown) =>
    program.error(`mutp: cannot read the playlist: ${e instanceof Error ? e.message : String(e)}`, {
      exitCode: EXIT.usage,
    }),
  );
  if (flags.outputDir) mkdirSync(flags.outputDir, { recursive: true });
  const codecs = await loadNodeCodecs();
  const host = nodeHost(flags);
  const client = new MutpClient(host, {
    origoUrls,
    codecs,
    insecureOrigo: flags.insecure === true,
    transport: flags.transport,
    ...declared(flags),
  });
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), flags.timeout);
  process.once('SIGINT', () => abort.abort());
  let code: number = EXIT.ok;
  try {
    const result = await downloadSeries(client, host.clock, segments, {
      mode: flags.mode,
      proxies: flags.proxies,
      staging: flags.stage,
      signal: abort.signal,
      onSegment: (s, object, i) => {
        if (flags.outputDir) writeFileSync(join(flags.outputDir, `${String(i).padStart(5, '0')}.seg`), object);
        const name = new URL(s.url).pathname.split('/').pop() ?? s.url;
        console.log(
          `${String(i + 1).padStart(5)}/${segments.length}  ${name.padEnd(24)} ${String(s.bytes).padStart(10)} B ` +
            `${s.durationMs.toFixed(0).padStart(6)} ms${s.staged ? '  staged' : ''}`,
        );
      },
    });
    console.log(formatSeries(result, flags.mode));
    if (flags.json) console.log(JSON.stringify(result));
  } catch (e) {
    const failed = exitCodeOf(e);
    console.error(`mutp: ${failed.message}`);
    code = failed.code;
  } finally {
    clearTimeout(timer);
    client.close();
    releaseNodeRtc();
  }
  process.exit(code);
}

program.parseAsync().catch((e: unknown) => {
  console.error(`mutp: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(EXIT.failed);
});
