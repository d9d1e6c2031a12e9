/**
 * Origin shielding set up on a proxy from its config (main.ts): as a child, its cache's misses
 * go through the shield fetch (shield-fetch.ts); as a parent, the shield endpoint
 * (shield-endpoint.ts) listens on its own port. Both, for a tier in between.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { ProxyConfig } from './config';
import { ObjectSource } from './object-source';
import type { Proxy } from './proxy';
import { childLabel } from './shield-auth';
import { ShieldEndpoint } from './shield-endpoint';
import { shieldFetcher } from './shield-fetch';

export interface Shield {
  /** Starts the parent's endpoint, if the proxy is one: its URL. */
  listen(): Promise<string | undefined>;
  close(): Promise<void>;
}

/** Sets shielding up as configured (child at once: no miss goes around it); undefined when off. */
export function setUpShield(config: ProxyConfig, proxy: Proxy): Shield | undefined {
  const shield = config.shield;
  if (!shield) return undefined;
  const { objects, metrics } = proxy.services;
  const logger = proxy.logger;
  const self = childLabel(config.proxyId ?? config.name);
  if (shield.parentUrl !== undefined) {
    if (!(objects instanceof ObjectSource)) throw new Error('origin shielding needs the proxy cache (ObjectSource)');
    objects.shieldWith((origin) =>
      shieldFetcher(origin, {
        parentUrl: shield.parentUrl!,
        key: shield.key,
        child: self,
        maxBytes: config.maxObjectBytes,
        timeoutMs: shield.timeoutMs,
        sampleFraction: shield.sampleFraction,
        samples: shield.samples,
        metrics,
        logger,
      }),
    );
    logger.info({ parent: shield.parentUrl }, 'origin shielding: misses go to the parent, checked against the origin');
  }
  // A parent passes its fetches' bodies on to children as they arrive.
  if (shield.port !== undefined) {
    if (!(objects instanceof ObjectSource)) throw new Error('origin shielding needs the proxy cache (ObjectSource)');
    objects.streamFetches();
  }
  let server: Server | undefined;
  return {
    async listen() {
      if (shield.port === undefined) return undefined;
      const endpoint = new ShieldEndpoint({
        key: shield.key,
        self,
        objects,
        logger,
        metrics,
        maxConcurrent: shield.maxConcurrent,
        maxPerChild: shield.maxPerChild,
        bytesPerChildPerMinute: shield.childBytesPerMinute,
      });
      const listening = (server = endpoint.server());
      const host = shield.host ?? config.httpHost;
      await new Promise<void>((resolve, reject) => {
        listening.once('error', reject);
        listening.listen(shield.port, host, () => {
          listening.off('error', reject);
          resolve();
        });
      });
      const { port } = listening.address() as AddressInfo;
      const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
      logger.info({ url }, 'origin shielding: parent endpoint up');
      return url;
    },
    async close() {
      const open = server;
      server = undefined;
      if (!open) return;
      open.closeAllConnections();
      await new Promise<void>((resolve) => open.close(() => resolve()));
    },
  };
}
