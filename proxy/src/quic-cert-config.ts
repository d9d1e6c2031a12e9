/**
 * The QUIC endpoint's certificate options (docs/deploy.md "QUIC endpoint"): by default the proxy
 * makes its own self-signed certificates and clients check them by hash (quic-certificates.ts);
 * an operator with a certificate from a CA gives its files instead, and clients validate it the
 * WebPKI way (chain and host name). The proxy re-reads the files when they change (certbot renew).
 */
import { Command, Option } from 'commander';
import { integer } from '@mutp/cli-options';

export interface QuicCaConfig {
  /** PEM: the leaf certificate first, then the intermediates (certbot's fullchain.pem). */
  certificateFile: string;
  /** PEM: its private key (PKCS#8, SEC1 or PKCS#1). */
  keyFile: string;
  /** How often the files' status is checked for a change. */
  checkIntervalMs: number;
}

export const DEFAULT_QUIC_CERT_CHECK_INTERVAL_MS = 60_000;

/** Adds the certificate-file options to the proxy's command. */
export function addQuicCertOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--quic-cert-file <path>',
        "QUIC endpoint: a CA-issued certificate chain (PEM, leaf first) naming the QUIC URL's host, instead of self-signed ones; re-read when it changes",
      ).env('MUTP_PROXY_QUIC_CERT_FILE'),
    )
    .addOption(
      new Option(
        '--quic-key-file <path>',
        "QUIC endpoint: the private key of --quic-cert-file's certificate (PEM)",
      ).env('MUTP_PROXY_QUIC_KEY_FILE'),
    )
    .addOption(
      new Option('--quic-cert-check-ms <ms>', 'how often the certificate and key files are checked for a change')
        .env('MUTP_PROXY_QUIC_CERT_CHECK_MS')
        .argParser(integer(100, 86_400_000))
        .default(DEFAULT_QUIC_CERT_CHECK_INTERVAL_MS),
    );
}

/** The CA-certificate part of the parsed options: undefined when not set; a usage error string when wrong. */
export function quicCaConfig(o: Record<string, unknown>): QuicCaConfig | string | undefined {
  const certificateFile = o.quicCertFile as string | undefined;
  const keyFile = o.quicKeyFile as string | undefined;
  if (certificateFile === undefined && keyFile === undefined) return undefined;
  if (certificateFile === undefined || keyFile === undefined) return '--quic-cert-file and --quic-key-file go together';
  if (o.quicPort === undefined) return '--quic-cert-file needs --quic-port (the QUIC endpoint it is for)';
  return { certificateFile, keyFile, checkIntervalMs: o.quicCertCheckMs as number };
}
