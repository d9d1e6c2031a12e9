/**
 * Entry point: `tsx proxy/src/main.ts --origo ws://127.0.0.1:8700/v1/proxy --secret ...`
 * (`--help` lists every option). Exits 0 after SIGTERM/SIGINT (peers, origo socket and HTTP
 * server closed), 1 on a start-up failure, 3 when origo refuses the secret.
 */
import { releaseNodeRtc } from '@mutp/node-rtc';
import { parseConfig } from './config';
import { createProxy } from './proxy';

export const EXIT_UNAUTHORIZED = 3;

async function main(): Promise<void> {
  const config = parseConfig(process.argv);
  let stopping = false;
  const stop = async (code: number, why: string) => {
    if (stopping) return;
    stopping = true;
    proxy.logger.info({ why }, 'shutting down');
    try {
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
      proxy.logger.fatal(
        `stopping: ${error.message}. Check --secret / MUTP_PROXY_SECRET: it must match origo's proxy secret.`,
      );
      void stop(EXIT_UNAUTHORIZED, 'unauthorized');
    },
  });
  process.on('SIGTERM', () => void stop(0, 'SIGTERM'));
  process.on('SIGINT', () => void stop(0, 'SIGINT'));
  try {
    const { httpUrl } = await proxy.start();
    proxy.logger.info({ httpUrl, origo: config.origoUrl ?? null }, 'proxy started');
  } catch (e) {
    proxy.logger.fatal({ err: e }, 'proxy failed to start');
    await stop(1, 'start-up failure');
  }
}

void main();
