/**
 * The test origin as a process of its own (the testbed runs it in its origin namespace):
 * `tsx e2e/src/origin-main.ts --host 10.78.3.2 --port 8900`. Prints `{"url": ...}` once listening;
 * SIGTERM closes it.
 */
import { Command } from 'commander';
import { startOrigin } from './origin';

const o = new Command()
  .name('origin')
  .description('the end-to-end test origin: /object/<bytes>/<seed> and the test media')
  .option('--host <address>', 'address to listen on', '127.0.0.1')
  .option('--port <n>', 'TCP port (0 = any free port)', '0')
  .parse()
  .opts<{ host: string; port: string }>();

startOrigin({ host: o.host, port: Number(o.port) })
  .then((origin) => {
    console.log(JSON.stringify({ url: origin.url }));
    const stop = () => void origin.close().then(() => process.exit(0));
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  })
  .catch((e: unknown) => {
    console.error(`origin: ${String(e)}`);
    process.exit(1);
  });
