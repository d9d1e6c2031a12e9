/**
 * The optional byte range of a `/v1/http` request: `start` and `length` query parameters, both or
 * neither, plain decimal digits, checked like a REQUEST's range (rangeProblem).
 */
import { ByteRange, rangeProblem } from '@mutp/shared';

export type RangeQuery = { ok: true; range?: ByteRange } | { ok: false; message: string };

const DECIMAL = /^\d{1,16}$/;

export function parseRangeQuery(query: URLSearchParams): RangeQuery {
  const start = query.get('start');
  const length = query.get('length');
  if (start === null && length === null) return { ok: true };
  if (start === null || length === null) return { ok: false, message: 'start and length go together' };
  if (!DECIMAL.test(start) || !DECIMAL.test(length))
    return { ok: false, message: 'start and length must be decimal numbers' };
  const range = { start: Number(start), length: Number(length) };
  const problem = rangeProblem(range);
  return problem ? { ok: false, message: problem } : { ok: true, range };
}
