// mailroom audit — the audit log of an account, newest first (what GET /audit answers).
import type { Command } from 'commander';
import { listAudit, parseAuditQuery, type AuditEntry } from '../../src/domain/audit/audit.ts';
import { print, resolveAccount, withContext } from '../shared.ts';

const row = (e: AuditEntry) => ({ at: e.createdAt, action: e.action, target: e.target, actor: e.actor.id ? `${e.actor.type} ${e.actor.id}` : e.actor.type, detail: JSON.stringify(e.detail) });

export function registerAudit(program: Command): void {
  program
    .command('audit')
    .description('the audit log, newest first: keys made and revoked, list changes, suspensions, …')
    .option('--account <id>', 'account (default: the default account)')
    .option('--action <action>', 'only this action, e.g. key.created')
    .option('--limit <n>', 'most entries to show (1-100)', '50')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string; action?: string; limit: string }, cmd: Command) => {
      const query = parseAuditQuery(new URLSearchParams({ limit: opts.limit, ...(opts.action ? { action: opts.action } : {}) }));
      const data = await withContext(cmd, async (ctx) => listAudit(ctx, await resolveAccount(ctx, opts.account), query));
      print(cmd, { data }, data.map(row));
    });
}
