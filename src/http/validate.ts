// Request validation with zod: the failing field is named in the error message.
import { z } from 'zod';
import { AppError } from '../domain/errors.ts';

function fieldName(path: PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

export function parseInput<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const res = schema.safeParse(input === undefined ? {} : input);
  if (res.success) return res.data;
  const issue = res.error.issues[0];
  if (issue.code === 'unrecognized_keys') {
    const where = issue.path.length ? ` in \`${fieldName(issue.path)}\`` : '';
    throw new AppError('VALIDATION_ERROR', `unknown field${issue.keys.length > 1 ? 's' : ''}${where}: ${issue.keys.map((k) => `\`${k}\``).join(', ')}`);
  }
  if (issue.path.length === 0) throw new AppError('VALIDATION_ERROR', `request body: ${issue.message}`);
  throw new AppError('VALIDATION_ERROR', `\`${fieldName(issue.path)}\`: ${issue.message}`);
}

/** A string that will end up in a mail header or a log line: no CR, LF or NUL. */
export const headerSafe = (max: number) =>
  z
    .string()
    .max(max, `must be at most ${max} characters`)
    .refine((s) => !/[\r\n\0]/.test(s), 'must not contain CR, LF or NUL characters');

/**
 * Query parameters through a zod object schema (parameters it does not name are left to other
 * parsers, e.g. parsePage); empty values count as absent. The failing parameter is named.
 */
export function parseQuery<S extends z.ZodType>(schema: S, query: URLSearchParams): z.infer<S> {
  const res = schema.safeParse(Object.fromEntries([...query].filter(([, v]) => v !== '')));
  if (res.success) return res.data;
  const issue = res.error.issues[0];
  throw new AppError('VALIDATION_ERROR', `query parameter \`${fieldName(issue.path)}\`: ${issue.message}`);
}
