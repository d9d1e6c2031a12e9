/** `--checksum sha-256=HEX` (aria2's form): the digest the saved file must have. */
import { InvalidArgumentError } from 'commander';

export interface Checksum {
  algorithm: 'sha-256';
  hex: string;
}

export function parseChecksum(text: string): Checksum {
  const m = /^(sha-?256)=([0-9a-fA-F]{64})$/i.exec(text.trim());
  if (!m) throw new InvalidArgumentError(`expected sha-256=<64 hex digits>, got "${text}"`);
  return { algorithm: 'sha-256', hex: m[2].toLowerCase() };
}
