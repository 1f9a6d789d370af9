// Pagination rules shared by every list: limit 1..100 (default 20), offset ≥ 0 (default 0).
// A limit above the maximum is refused with 400 rather than silently capped, so a client
// never believes it received everything when it did not.
import { AppError } from './errors.ts';

export interface Page {
  limit: number;
  offset: number;
}

export interface PageResult<T> extends Page {
  data: T[];
  total: number;
  /** Lists that count only so far (a search: docs/api.md "Search at scale"): `total` is a lower bound. */
  totalIsLowerBound?: boolean;
}

function intParam(name: string, raw: string | null, def: number, min: number, max: number): number {
  if (raw === null || raw === '') return def;
  if (!/^\d+$/.test(raw)) throw new AppError('VALIDATION_ERROR', `query parameter \`${name}\` must be a whole number`);
  const n = Number(raw);
  if (n < min || n > max) throw new AppError('VALIDATION_ERROR', `query parameter \`${name}\` must be between ${min} and ${max}`);
  return n;
}

/** The page size when none is asked for, and the largest one may ask for. */
export const PAGE_LIMITS = { default: 20, max: 100 } as const;

export function parsePage(query: URLSearchParams, opts: { defaultLimit?: number; maxLimit?: number } = {}): Page {
  return {
    limit: intParam('limit', query.get('limit'), opts.defaultLimit ?? PAGE_LIMITS.default, 1, opts.maxLimit ?? PAGE_LIMITS.max),
    offset: intParam('offset', query.get('offset'), 0, 0, Number.MAX_SAFE_INTEGER),
  };
}

export { intParam };
