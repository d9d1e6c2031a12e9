/**
 * A service URL for logs and errors (PostgreSQL, Redis), with its password (in the authority, or
 * as a `password` parameter) replaced. Textual, not through URL: libpq forms such as
 * `postgres://user@/db?host=/run/postgresql` are not WHATWG URLs.
 */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:@/?#]*):[^@/?#]*@/i, '$1:***@').replace(/([?&]password=)[^&#]*/gi, '$1***');
}
