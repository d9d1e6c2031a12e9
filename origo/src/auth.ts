import { secretsEqual } from '@mutp/cli-options';

/** Checks an `Authorization: Bearer <token>` header against the admin token. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  if (header === undefined) return false;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match !== null && secretsEqual(match[1], token);
}
