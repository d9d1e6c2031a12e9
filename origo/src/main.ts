#!/usr/bin/env -S node --enable-source-maps --conditions=mutp-compiled
/**
 * `origo` entry point: `tsx origo/src/main.ts [flags]` from source, `mutp-origo [flags]` compiled
 * (npm run build; the shebang's condition selects the compiled workspaces). See --help. Exits 0
 * after a graceful shutdown on SIGTERM/SIGINT, 1 when it cannot start, 2 on bad flags.
 */
import './compiled-check';
import { parseCli } from './cli';
import { createOrigo } from './server';

async function main(): Promise<void> {
  const options = parseCli(process.argv);
  let origo;
  try {
    origo = createOrigo(options);
  } catch (err) {
    console.error(`origo: cannot start: ${(err as Error).message}`);
    process.exit(1);
  }
  const { log } = origo;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    origo.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGHUP', () => {
    try {
      origo.reloadProxyKeys();
    } catch (err) {
      log.error({ err }, 'reloading the proxy keys failed: keeping the old ones');
    }
  });
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  try {
    await origo.listen();
  } catch (err) {
    log.fatal({ err }, 'cannot listen');
    await origo.close().catch(() => {});
    process.exit(1);
  }
}

void main();
