// mailroom domains add|list|show|verify|remove — custom domains, and the shared domain's
// records (`domains show shared`). `show` prints zone-file lines to paste, each preceded by
// a comment with what DNS answers for it right now.
import type { Command } from 'commander';
import type { AppContext } from '../../src/context.ts';
import { ensureSharedDkimKey } from '../../src/domain/domains/dkim-keys.ts';
import { zoneLine, type DnsRecord, type RecordCheck, type RecordRole } from '../../src/domain/domains/domain-check.ts';
import {
  addDomain,
  deleteDomain,
  dnsRecordsFor,
  domainView,
  findDomainByIdOrName,
  inspectRecords,
  listAllDomains,
  verifyDomain,
  type Domain,
  type DomainRecords,
} from '../../src/domain/domains/domains.ts';
import { globals, print, resolveAccount, withContext } from '../shared.ts';

const ROLE_NOTE: Record<RecordRole, string> = {
  ownership: 'ownership token (sending, required)',
  dkim: 'DKIM public key (sending, required)',
  spf: 'SPF (sending, recommended)',
  dmarc: 'DMARC policy (sending, recommended)',
  mx: 'MX (receiving, required to receive mail)',
  mta_sts: 'MTA-STS policy id (receiving, recommended: senders then require TLS to the MX)',
  mta_sts_host: 'MTA-STS policy host, served by this appliance (receiving, recommended; needs HTTPS for the name)',
  tls_rpt: 'TLS-RPT (receiving, recommended: senders report TLS failures here)',
};

const roleOf = (plan: DomainRecords['plan'], r: DnsRecord): RecordRole => (Object.entries(plan) as Array<[RecordRole, DnsRecord | undefined]>).find(([, v]) => v === r)![0];

/** Zone lines, each after a comment naming the record and (when checked) its state in DNS. */
export function renderZone(records: DomainRecords, checks?: RecordCheck[]): string {
  const lines: string[] = [];
  for (const r of [...records.sending, ...records.receiving]) {
    const role = roleOf(records.plan, r);
    const check = checks?.find((c) => c.role === role);
    lines.push(`; ${ROLE_NOTE[role]}${check ? ` — in DNS now: ${check.state} (${check.detail})` : ''}`);
    lines.push(zoneLine(r));
  }
  return lines.join('\n') + '\n';
}

const statusLine = (d: Domain) =>
  `; ${d.domain} (${d.id}) sending: ${d.sendingStatus}, receiving: ${d.receivingStatus}` +
  `, last checked: ${d.lastCheckedAt ?? 'never'}${d.lastCheckError ? `\n; last check could not finish: ${d.lastCheckError}` : ''}`;

const row = (d: Domain & { accountId?: string }) => ({
  id: d.id,
  domain: d.domain,
  sending: d.sendingStatus,
  receiving: d.receivingStatus,
  account: d.accountId,
  lastCheckedAt: d.lastCheckedAt,
  createdAt: d.createdAt,
});

/** The shared domain (`shared` or its name) or a custom domain (id or name). */
async function recordsOf(ctx: AppContext, which: string): Promise<{ records: DomainRecords; domain?: Domain }> {
  const shared = ctx.config.shared_domain.toLowerCase().replace(/\.$/, '');
  if (which === 'shared' || which.toLowerCase().replace(/\.$/, '') === shared) {
    await ensureSharedDkimKey(ctx);
    return { records: (await dnsRecordsFor(ctx, shared))! };
  }
  const rowOf = await findDomainByIdOrName(ctx, which);
  return { records: (await dnsRecordsFor(ctx, rowOf.domain))!, domain: domainView(ctx, rowOf) };
}

export function registerDomains(program: Command): void {
  const cmd = program.command('domains').description('custom domains: DNS records to publish, verification');

  cmd
    .command('add <domain>')
    .description('add a custom domain and print the DNS records to publish')
    .option('--account <id>', 'account (default: the default account)')
    .option('--json', 'print the Domain object as JSON')
    .action(async (name: string, opts: { account?: string }, c: Command) => {
      await withContext(c, async (ctx) => {
        const d = await addDomain(ctx, await resolveAccount(ctx, opts.account), name);
        if (globals(c).json) return print(c, d);
        process.stdout.write(`${statusLine(d)}\n; Publish these records in the zone of ${d.domain}, then run: mailroom domains verify ${d.id}\n` + renderZone((await dnsRecordsFor(ctx, d.domain))!));
      });
    });

  cmd
    .command('list')
    .description('list custom domains of every account (or of --account)')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string }, c: Command) => {
      const rows = await withContext(c, (ctx) => listAllDomains(ctx, opts.account));
      print(c, { data: rows }, rows.map(row));
    });

  cmd
    .command('show <domain>')
    .description('print the DNS records of a domain (id, name, or "shared") as zone-file lines, with their state in DNS')
    .option('--no-check', 'do not ask DNS; print the records only')
    .option('--json', 'print JSON')
    .action(async (which: string, opts: { check: boolean }, c: Command) => {
      await withContext(c, async (ctx) => {
        const { records, domain } = await recordsOf(ctx, which);
        const checks = opts.check ? await inspectRecords(ctx, records) : undefined;
        if (globals(c).json) {
          const list = [...records.sending, ...records.receiving].map((r) => {
            const role = roleOf(records.plan, r);
            const check = checks?.find((x) => x.role === role);
            return { ...r, role, zone: zoneLine(r), ...(check ? { state: check.state, detail: check.detail } : {}) };
          });
          return print(c, { domain: records.domain, shared: records.shared, status: domain ?? null, records: list });
        }
        const head = domain ? statusLine(domain) : `; ${records.domain}: the shared domain (inboxes without a custom domain)`;
        process.stdout.write(`${head}\n${renderZone(records, checks)}`);
      });
    });

  cmd
    .command('verify <domain>')
    .description('check the DNS records now and update the statuses (id or name)')
    .option('--json', 'print the updated Domain as JSON')
    .action(async (which: string, _opts: unknown, c: Command) => {
      await withContext(c, async (ctx) => {
        const d = await verifyDomain(ctx, null, (await findDomainByIdOrName(ctx, which)).id);
        if (globals(c).json) return print(c, d);
        process.stdout.write(`${statusLine(d)}\n`);
        print(
          c,
          d,
          d.dnsCheck.map((k) => ({ record: k.role, type: k.type, name: k.name, state: k.state, detail: k.detail })),
        );
      });
    });

  cmd
    .command('remove <domain>')
    .description('delete a domain (id or name); its inboxes move to the shared domain and keep their messages')
    .option('--json', 'print JSON')
    .action(async (which: string, _opts: unknown, c: Command) => {
      await withContext(c, async (ctx) => {
        const rowOf = await findDomainByIdOrName(ctx, which);
        const { moved } = await deleteDomain(ctx, null, rowOf.id);
        if (globals(c).json) return print(c, { id: rowOf.id, domain: rowOf.domain, moved });
        process.stdout.write(`removed ${rowOf.domain} (${rowOf.id}); DNS records at the registrar are left as they are\n`);
        for (const m of moved) process.stdout.write(`moved inbox ${m.id}: ${m.from} -> ${m.to}\n`);
      });
    });
}
