// The audit log (PRODUCT.md "Audit"): who did which privileged act or which policy decided what.
// An entry is written with the transaction that makes the change (`recordAudit(tx, …)`), so a
// change is never committed without its entry, nor an entry without its change. Read with the
// `review` scope (GET /audit) or `mailroom audit`; kept `retention.audit`.
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { deleteAuditEntriesCreatedBefore, insertAuditEntry, listAuditEntries, type AuditRow } from '../../store/repo/audit.ts';
import type { Db } from '../../store/client.ts';
import { AppError } from '../errors.ts';
import { intParam } from '../pagination.ts';

/** Who acted: a key (its id), the CLI on the server, a person in the dashboard, or mailroom itself. */
export interface Actor {
  type: 'key' | 'cli' | 'dashboard' | 'system';
  id?: string;
}

export const CLI_ACTOR: Actor = { type: 'cli' };
export const SYSTEM_ACTOR: Actor = { type: 'system' };
/** The actor of a request made with an API key. */
export const keyActor = (keyId: string): Actor => ({ type: 'key', id: keyId });

export interface AuditEntry {
  id: string;
  createdAt: string;
  actor: Actor;
  action: string;
  target: string;
  detail: Record<string, unknown>;
}

export interface AuditQuery {
  action?: string;
  /** An entry id: the entries after it in the list's order (older), to page on. */
  after?: string;
  limit: number;
}

const AUDIT_ID = /^aud_[0-9a-z]{26}$/;
const MAX_LIMIT = 100;

/** Records an act inside transaction `tx`, the one that makes the change. */
export async function recordAudit(ctx: AppContext, tx: Db, accountId: string, actor: Actor, action: string, target: string, detail: Record<string, unknown> = {}): Promise<void> {
  const now = ctx.clock.now();
  await insertAuditEntry(tx, {
    id: newId('aud', now.getTime()),
    accountId,
    createdAt: now.toISOString(),
    actorType: actor.type,
    actorId: actor.id ?? null,
    action,
    target,
    detail: JSON.stringify(detail),
  });
}

export function parseAuditQuery(q: URLSearchParams): AuditQuery {
  const action = q.get('action') ?? undefined;
  if (action !== undefined && !/^[a-z_]{1,40}\.[a-z_]{1,40}$/.test(action)) throw new AppError('VALIDATION_ERROR', 'query parameter `action` must be an action such as key.created');
  const after = q.get('after') ?? undefined;
  if (after !== undefined && !AUDIT_ID.test(after)) throw new AppError('VALIDATION_ERROR', 'query parameter `after` must be an audit entry id (aud_…)');
  return { action, after, limit: intParam('limit', q.get('limit'), 50, 1, MAX_LIMIT) };
}

const view = (r: AuditRow): AuditEntry => ({
  id: r.id,
  createdAt: r.createdAt,
  actor: r.actorId ? { type: r.actorType as Actor['type'], id: r.actorId } : { type: r.actorType as Actor['type'] },
  action: r.action,
  target: r.target,
  detail: JSON.parse(r.detail) as Record<string, unknown>,
});

/** The account's entries, newest first. */
export async function listAudit(ctx: AppContext, accountId: string, query: AuditQuery): Promise<AuditEntry[]> {
  return (await listAuditEntries(ctx.db, accountId, { action: query.action, before: query.after, limit: query.limit })).map(view);
}

/** Deletes entries older than `retention.audit` (housekeeping, hourly). */
export async function sweepAudit(ctx: AppContext): Promise<number> {
  return deleteAuditEntriesCreatedBefore(ctx.db, new Date(ctx.clock.now().getTime() - ctx.config.retention.audit).toISOString());
}
