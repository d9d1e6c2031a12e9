#!/usr/bin/env -S node --enable-source-maps --conditions=mutp-compiled
/**
 * Entry point: `tsx proxy/src/main.ts --origo ws://127.0.0.1:8700/v1/proxy --secret ...` from
 * source, `mutp-proxy ...` compiled (npm run build; the shebang's condition selects the compiled
 * workspaces). `--help` lists every option. SIGTERM/SIGINT drain (drain.ts: no new clients or
 * transfers, origo told at once, active transfers get --drain-timeout-ms), then close peers, the
 * origo socket and the HTTP server and exit 0; a second signal exits 1 at once. Exits 1 on a
 * start-up failure, 2 on a usage error, 3 when origo refuses this proxy (its reason is logged).
 */
import './compiled-check';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { parseConfig } from './config';
import { createProxy } from './proxy';
import { setUpShield } from './shield-setup';

export const EXIT_UNAUTHORIZED = 3;

async function main(): Promise<void> {
  const config = parseConfig(process.argv);
  let stopping = false;
  const stop = async (code: number, why: string) => {
    if (stopping) return;
    stopping = true;
    proxy.logger.info({ why }, 'shutting down');
    try {
      await shield?.close();
      await proxy.close();
    } catch (e) {
      proxy.logger.error({ err: e }, 'error while closing');
      code = code || 1;
    }
    releaseNodeRtc();
    proxy.logger.flush?.();
    process.exit(code);
  };
  const proxy = createProxy(config, {
    onFatal: (error) => {
      // Origo says why (a wrong key, a revoked or banned one, an httpUrl it refuses): the message
      // carries its reason and the advice for that reason (origo-link.ts refusalAdvice).
      proxy.logger.fatal(`stopping: ${error.message}`);
      void stop(EXIT_UNAUTHORIZED, 'unauthorized');
    },
  });
  // Origin shielding (--shield-parent / --shield-port), off unless configured.
  const shield = setUpShield(config, proxy);
  let draining = false;
  const drainThenStop = (signal: NodeJS.Signals) => {
    if (draining || stopping) {
      proxy.logger.warn({ signal }, 'second signal: exiting now');
      proxy.logger.flush?.();
      process.exit(1);
    }
    draining = true;
    proxy.logger.info({ signal, drainTimeoutMs: config.drainTimeoutMs }, 'draining before shutdown');
    proxy.drain(config.drainTimeoutMs).then(
      () => stop(0, signal),
      (e: unknown) => {
        proxy.logger.error({ err: e }, 'drain failed');
        return stop(1, signal);
      },
    );
  };
  process.on('SIGTERM', drainThenStop);
  process.on('SIGINT', drainThenStop);
  try {
    const { httpUrl } = await proxy.start();
    const shieldUrl = await shield?.listen();
    proxy.logger.info(
      { httpUrl, origo: config.origoUrl ?? null, ...(shieldUrl ? { shieldUrl } : {}) },
      'proxy started',
    );
  } catch (e) {
    proxy.logger.fatal({ err: e }, 'proxy failed to start');
    await stop(1, 'start-up failure');
  }
}

void main();
