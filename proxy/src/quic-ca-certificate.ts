/**
 * The QUIC endpoint's certificate from a CA (an operator's certificate and key files, e.g.
 * certbot's fullchain.pem and privkey.pem): clients validate it the WebPKI way, so the proxy
 * reports no hashes. The files are checked for a change every `checkIntervalMs` (their status,
 * through symlinks: certbot swaps the links) and a changed pair is read, checked and handed to
 * the endpoint for new handshakes. A pair that fails (unreadable, mismatched key, expired, not
 * naming the host, or refused by the endpoint) is logged and the previous one stays: a renewal
 * half-written when it was read is read again once its second file changes.
 */
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import type { QuicCaConfig } from './quic-cert-config';
import type { QuicCertificate } from './quic-certificates';

const DAY_MS = 86_400_000;
/** A certificate this close to its end is warned about (once a day): renewal has not happened. */
const EXPIRY_WARNING_MS = 7 * DAY_MS;
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * Checks a certificate chain and key for serving `host` at `now` and returns them as the
 * endpoint's certificate; throws an Error saying what is wrong. The chain's trust is the
 * clients' to judge (their roots); here: the key is the leaf's, the leaf is valid now and names
 * `host`, and each certificate is issued by the next (a chain in the wrong order or with a
 * foreign certificate fails every client).
 */
export function checkCaCertificate(
  certificatePem: string,
  privateKeyPem: string,
  host: string,
  now: number,
): QuicCertificate {
  const blocks = certificatePem.match(PEM_CERTIFICATE);
  if (blocks === null) throw new Error('the certificate file holds no PEM certificate');
  let chain: X509Certificate[];
  try {
    chain = blocks.map((b) => new X509Certificate(b));
  } catch (e) {
    throw new Error(`the certificate file holds an unreadable certificate: ${(e as Error).message}`);
  }
  const leaf = chain[0];
  let key;
  try {
    key = createPrivateKey(privateKeyPem);
  } catch {
    throw new Error('the key file holds no usable private key');
  }
  if (!leaf.checkPrivateKey(key)) throw new Error("the private key is not the certificate's");
  for (let i = 0; i + 1 < chain.length; i++)
    if (!chain[i].checkIssued(chain[i + 1]))
      throw new Error(
        `certificate ${i + 1} of the chain is not issued by certificate ${i + 2} (leaf first, then its issuers)`,
      );
  const notBefore = Date.parse(leaf.validFrom);
  const notAfter = Date.parse(leaf.validTo);
  if (!(now >= notBefore)) throw new Error(`the certificate is not valid before ${leaf.validFrom}`);
  if (!(now < notAfter)) throw new Error(`the certificate expired at ${leaf.validTo}`);
  const named = isIP(host) !== 0 ? leaf.checkIP(host) : leaf.checkHost(host, { subject: 'never' });
  if (named === undefined)
    throw new Error(
      `the certificate does not name ${host}, the QUIC URL's host (its names: ${leaf.subjectAltName ?? 'none'})`,
    );
  return {
    certificatePem,
    privateKeyPem,
    sha256: new Uint8Array(createHash('sha256').update(leaf.raw).digest()),
    notBefore,
    notAfter,
  };
}

export interface CaCertificateFilesOptions {
  files: QuicCaConfig;
  /** The QUIC URL's host name or IP address: the certificate must name it. */
  host: string;
  /** Wall-clock time, ms since the epoch. */
  now: () => number;
  /** New handshakes must present this from now on; throws when the endpoint refuses it. */
  onChange: (certificate: QuicCertificate) => void;
  logger: Logger;
}

export class CaCertificateFiles {
  private current: QuicCertificate;
  private seen: string;
  private timer?: NodeJS.Timeout;
  private checking = false;
  private lastExpiryWarningAt = -Infinity;
  private readonly counters = { reloads: 0, reloadFailures: 0 };

  /** Reads and checks the files; throws when they are not a usable certificate for `host`. */
  constructor(private readonly o: CaCertificateFilesOptions) {
    this.seen = this.statusNow();
    const { certificateFile, keyFile } = o.files;
    this.current = checkCaCertificate(
      readFileSync(certificateFile, 'utf8'),
      readFileSync(keyFile, 'utf8'),
      o.host,
      o.now(),
    );
    this.logLoaded('QUIC certificate loaded');
  }

  /** The certificate new handshakes get now. */
  get certificate(): QuicCertificate {
    return this.current;
  }

  /** None: clients validate a CA's certificate by its chain and host name, not by hash. */
  hashes(): string[] {
    return [];
  }

  stats() {
    return { notAfter: new Date(this.current.notAfter).toISOString(), ...this.counters };
  }

  start(): void {
    this.stop();
    this.timer = setInterval(() => void this.check(), this.o.files.checkIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Reloads the pair when a file's status changed since the last look (the timer calls it; tests
   * call it directly). Resolves true when a new certificate was taken.
   */
  async check(): Promise<boolean> {
    if (this.checking) return false;
    this.checking = true;
    try {
      this.warnIfExpiring();
      const status = await this.status();
      if (status === this.seen) return false;
      this.seen = status;
      return await this.reload();
    } finally {
      this.checking = false;
    }
  }

  private async reload(): Promise<boolean> {
    const { certificateFile, keyFile } = this.o.files;
    try {
      const [certificatePem, keyPem] = await Promise.all([
        readFile(certificateFile, 'utf8'),
        readFile(keyFile, 'utf8'),
      ]);
      const next = checkCaCertificate(certificatePem, keyPem, this.o.host, this.o.now());
      this.o.onChange(next);
      this.current = next;
      this.counters.reloads++;
      this.lastExpiryWarningAt = -Infinity;
      this.logLoaded('QUIC certificate reloaded');
      return true;
    } catch (err) {
      this.counters.reloadFailures++;
      this.o.logger.error(
        { err, certificateFile, keyFile, kept: new Date(this.current.notAfter).toISOString() },
        'QUIC certificate files changed but cannot be used: the previous certificate stays',
      );
      return false;
    }
  }

  private warnIfExpiring(): void {
    const now = this.o.now();
    const left = this.current.notAfter - now;
    if (left > EXPIRY_WARNING_MS || now - this.lastExpiryWarningAt < DAY_MS) return;
    this.lastExpiryWarningAt = now;
    const notAfter = new Date(this.current.notAfter).toISOString();
    if (left <= 0)
      this.o.logger.error(
        { notAfter },
        'QUIC certificate expired: clients refuse it and use WebRTC until it is renewed',
      );
    else this.o.logger.warn({ notAfter }, 'QUIC certificate expires within 7 days and has not been renewed');
  }

  private logLoaded(message: string): void {
    const leaf = new X509Certificate(this.current.certificatePem.match(PEM_CERTIFICATE)![0]);
    this.o.logger.info(
      { subject: leaf.subject, issuer: leaf.issuer, notAfter: new Date(this.current.notAfter).toISOString() },
      message,
    );
  }

  /** Both files' status (through symlinks); a missing file reads as its own status. */
  private async status(): Promise<string> {
    const { certificateFile, keyFile } = this.o.files;
    const one = (path: string) => stat(path).then(fileStatus, () => fileStatus(undefined));
    return (await Promise.all([one(certificateFile), one(keyFile)])).join('|');
  }

  private statusNow(): string {
    const { certificateFile, keyFile } = this.o.files;
    const one = (path: string) => fileStatus(statSync(path, { throwIfNoEntry: false }));
    return [one(certificateFile), one(keyFile)].join('|');
  }
}

/** What tells a changed file: inode (a renamed-in or re-linked file), size and modification time. */
function fileStatus(s: { ino: number; size: number; mtimeMs: number } | undefined): string {
  return s === undefined ? 'missing' : `${s.ino}:${s.size}:${s.mtimeMs}`;
}
