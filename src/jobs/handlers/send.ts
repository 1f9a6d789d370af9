// The `send` job: one attempt to deliver a message to the recipients of one domain (or to the
// local inboxes). Remote: MX lookup, then each MX host in preference order until one holds an
// SMTP transaction; each recipient's reply is classified (outbound/classify.ts). Local: the
// same acceptInbound path as inbound SMTP. Results are committed with the job's outcome.
import type { AppContext } from '../../context.ts';
import { DnsUnavailableError } from '../../dns.ts';
import { bounceAddress } from '../../domain/inbound/bounce-address.ts';
import { prepareInbound, resolveRecipient } from '../../domain/inbound/inbound.ts';
import { releaseBlobs } from '../../store/blobs/blob-refs.ts';
import { removeStaged } from '../../store/blobs/staging.ts';
import { afterCommit } from '../../store/store.ts';
import type { InboxRow } from '../../domain/inboxes/inboxes.ts';
import type { MessageRow, RecipientOutcome } from '../../domain/mail/messages.ts';
import { SEND_JOB, findOutboundRow, markSending, pendingRecipients, recordOutcomes, type SendJobPayload } from '../../domain/sending/sending.ts';
import { errorFields } from '../../log.ts';
import { classifyReply } from '../../outbound/classify.ts';
import { deliverAttempt, isTlsFailure, type AttemptResult, type Envelope, type RecipientReply, type Target } from '../../outbound/deliver.ts';
import { resolveMx, type MxHost } from '../../outbound/mx.ts';
import { mxMatches, stsPolicyFor } from '../../outbound/mta-sts.ts';
import { daneFor, tlsaName, tlsaText, type DaneStatus } from '../../outbound/dane.ts';
import { TlsSessions, tlsFailureType } from '../../outbound/tls-rpt.ts';
import { readSource, sourceForDelivery, type Source } from '../../outbound/source-cache.ts';
import { LARGE_MESSAGE_BYTES, stageStored, type StagedMessage } from '../../domain/inbound/inbound-large.ts';
import { replyFor } from '../../smtp/replies.ts';
// Bounce and complaint reports are the other half of outbound delivery: registers their handler.
import '../../domain/inbound/reports.ts';
import type { JobHandler } from '../runner.ts';
import { fail, ok, retry, type Commit, type JobRow } from '../table.ts';

/** Per-recipient result of one attempt; `deferred` means "try again on the schedule". */
type Result = RecipientOutcome & { status: 'sent' | 'delivered' | 'bounced' | 'failed' | 'deferred' };

const all = (addresses: string[], status: Result['status'], response: string): Result[] => addresses.map((address) => ({ address, status, response }));

/**
 * Delivers to inboxes of this appliance: parsed, authenticated and its files written now; its
 * rows (`commit`) are stored in the transaction that records the job's outcome, so a crash
 * between the two can neither lose the delivery nor make it twice.
 */
async function deliverLocally(ctx: AppContext, row: MessageRow, addresses: string[]): Promise<{ results: Result[]; commit?: Commit }> {
  const results: Result[] = [];
  const inboxes: InboxRow[] = [];
  const targets: string[] = [];
  for (const address of addresses) {
    try {
      // The receiving inbox's lists apply to mail from a neighbour inbox too.
      inboxes.push(await resolveRecipient(ctx, address, row.fromAddress));
      targets.push(address);
    } catch (err) {
      // The same answer the SMTP listener gives: 550 5.1.1 unknown, 550 5.2.1 suspended.
      const reply = replyFor(err);
      const action = reply.responseCode >= 500 ? 'bounced' : 'deferred';
      results.push({ address, status: action, response: `${reply.responseCode} ${reply.message}` });
    }
  }
  if (!inboxes.length) return { results };
  // A large source is received as large SMTP DATA is, from a staged copy (never held whole);
  // stored, that copy has become the inbox's source file, and what is left of it goes.
  let staged: StagedMessage | undefined;
  const leftovers = (more: string[] = []) => removeStaged(staged ? [staged.path, ...more] : more);
  try {
    if (row.size > LARGE_MESSAGE_BYTES) staged = await stageStored(ctx, row.rawPath!, row.fromAddress);
    const raw = staged ?? (await readSource(ctx, row.rawPath!));
    const prepared = await prepareInbound(ctx, { raw, mailFrom: row.fromAddress, recipients: inboxes, skipAuthentication: true });
    results.push(...all(targets, 'delivered', '250 2.0.0 delivered to a local inbox'));
    if (!prepared) {
      await leftovers();
      return { results };
    }
    return {
      results,
      commit: async (tx) => {
        await prepared.store(tx);
        // Files no stored row names (a redelivery recognised) go once this has committed; after
        // a failed commit the hourly orphan sweep removes them.
        afterCommit(() => void releaseBlobs(ctx, prepared.files).then(() => leftovers(prepared.staged)));
      },
    };
  } catch (err) {
    await leftovers();
    ctx.log.error('local delivery failed', { messageId: row.id, ...errorFields(err) });
    const reply = replyFor(err);
    results.push(...all(targets, reply.responseCode >= 500 ? 'bounced' : 'deferred', `${reply.responseCode} ${reply.message}`));
    return { results };
  }
}

function fromReplies(res: Extract<AttemptResult, { kind: 'replies' }>, addresses: string[]): Result[] {
  return addresses.map((address) => {
    const r = res.replies.get(address.toLowerCase());
    if (!r) return { address, status: 'deferred', response: `no reply from ${res.host}` };
    if (r.accepted) return { address, status: 'sent', response: r.response };
    const verdict = classifyReply({ code: r.code, response: r.response });
    return { address, status: verdict.action === 'bounce' ? 'bounced' : 'deferred', response: r.response || `${r.code}` };
  });
}

/**
 * One transaction per recipient over the same (pooled) connection: each gets its own bounce
 * address as MAIL FROM (domain/inbound/bounce-address.ts), so a report can only ever change the
 * recipient it was sent for. ENVID lets a DSN name the message too (RFC 3461). Unreachable
 * only when the first transaction found no server; a later failure leaves the rest deferred.
 */
async function attemptEach(ctx: AppContext, target: Target | 'relay', row: MessageRow, addresses: string[], raw: Source, signal: AbortSignal): Promise<AttemptResult> {
  const replies = new Map<string, RecipientReply>();
  let host = '';
  for (const address of addresses) {
    if (signal.aborted) break;
    const envelope: Envelope = { from: bounceAddress(ctx, row, address), to: [address], envid: row.id };
    const res = await deliverAttempt(ctx, target, envelope, raw, signal);
    if (res.kind === 'unreachable') {
      if (!replies.size) return res;
      break;
    }
    host = res.host;
    for (const [k, v] of res.replies) replies.set(k, v);
  }
  return { kind: 'replies', host, replies };
}

/** The recipients a deadline stopped: deferred, retried on the schedule. */
const stopped = (signal: AbortSignal, addresses: string[], last: string): Result[] =>
  all(addresses, 'deferred', `${(signal.reason as Error)?.message ?? 'attempt aborted'}; connection closed${last ? ` (${last})` : ''}`);

async function deliverRemotely(ctx: AppContext, row: MessageRow, domain: string, addresses: string[], signal: AbortSignal, tls: TlsSessions): Promise<Result[]> {
  const raw = await sourceForDelivery(ctx, row.rawPath!, row.size);
  if (ctx.config.outbound.relay) {
    const res = await attemptEach(ctx, 'relay', row, addresses, raw, signal);
    if (res.kind === 'replies') return fromReplies(res, addresses);
    if (signal.aborted) return stopped(signal, addresses, 'relay');
    return all(addresses, 'deferred', `relay unreachable: ${res.error}`);
  }
  let route;
  try {
    route = await resolveMx(ctx, domain);
  } catch (err) {
    if (err instanceof DnsUnavailableError) return all(addresses, 'deferred', `DNS lookup failed for ${domain}: ${err.code}`);
    throw err;
  }
  if (route.kind === 'null-mx') return all(addresses, 'failed', `${domain} accepts no mail (null MX, RFC 7505)`);
  if (route.kind === 'none') return all(addresses, 'failed', `${domain} has no MX or address record`);
  await tls.start();
  const sts = ctx.config.outbound.mta_sts ? await stsPolicyFor(ctx, domain) : undefined;
  tls.usePolicy(sts?.kind === 'policy' ? sts.policy : undefined, sts?.kind === 'none' ? sts.failure : undefined);
  let dane;
  try {
    dane = await daneFor(ctx, domain, route.hosts);
  } catch (err) {
    if (err instanceof DnsUnavailableError) return all(addresses, 'deferred', `DANE: DNSSEC lookup failed for ${domain}: ${err.code}`);
    throw err;
  }
  return viaMx(ctx, row, domain, route.hosts, addresses, raw, signal, tls, dane);
}

/**
 * Each MX host in preference order until one holds a transaction. Under an MTA-STS policy
 * (RFC 8461 §5) a host it names gets TLS with a certificate checked for its name; under
 * `enforce` a host it does not name, or one that fails the check, is skipped, and the reason
 * ends in the recipients' response; under `testing` both are only reported (TLS-RPT).
 */
async function viaMx(
  ctx: AppContext,
  row: MessageRow,
  domain: string,
  hosts: MxHost[],
  addresses: string[],
  raw: Source,
  signal: AbortSignal,
  tls: TlsSessions,
  dane?: Map<string, DaneStatus>,
): Promise<Result[]> {
  const policy = tls.policy;
  const enforce = policy?.mode === 'enforce';
  let last = '';
  for (const host of hosts) {
    // DANE first (RFC 8461 §2): a host with TLSA records is authenticated by them alone.
    const tlsa = dane?.get(host.name);
    if (tlsa) {
      const daneResult = await viaDane(ctx, row, host, tlsa, addresses, raw, signal, tls);
      if (Array.isArray(daneResult)) return daneResult;
      last = daneResult;
      continue;
    }
    const listed = !policy || mxMatches(policy, host.name);
    if (!listed) {
      tls.failure('validation-failure', host.name, '', `${host.name} is not an MX host of the MTA-STS policy`);
      if (enforce) {
        last = `MTA-STS policy of ${domain} (enforce) does not name ${host.name}`;
        continue;
      }
    }
    for (const address of host.addresses) {
      if (signal.aborted) return stopped(signal, addresses, last);
      const target: Target = { name: host.name, address, port: ctx.config.outbound.mx_port, verify: !!policy && listed };
      let res = await attemptEach(ctx, target, row, addresses, raw, signal);
      if (res.kind === 'unreachable' && target.verify && isTlsFailure(res) && !signal.aborted) {
        tls.failure(tlsFailureType(res.error), host.name, address, res.error);
        if (!enforce) res = await attemptEach(ctx, { ...target, verify: false }, row, addresses, raw, signal);
        else res = { ...res, error: `MTA-STS (enforce): ${res.error}` };
      } else if (res.kind === 'replies' && listed) tls.success();
      if (res.kind === 'replies') return fromReplies(res, addresses);
      if (signal.aborted) return stopped(signal, addresses, res.host);
      last = `${res.host}: ${res.error}`;
      ctx.log.warn('mx unreachable', { messageId: row.id, host: res.host, error: res.error });
    }
  }
  return all(addresses, 'deferred', `no MX host of ${domain} reachable; last: ${last}`);
}

/**
 * Delivery to one MX host with TLSA records (RFC 7672): TLS required, the certificate checked
 * against them; a bogus TLSA answer or a mismatch skips the host (its reason is returned).
 */
async function viaDane(ctx: AppContext, row: MessageRow, host: MxHost, tlsa: DaneStatus, addresses: string[], raw: Source, signal: AbortSignal, tls: TlsSessions): Promise<Result[] | string> {
  const name = tlsaName(ctx, host.name);
  if (tlsa.kind === 'bogus') {
    tls.failure('dnssec-invalid', host.name, '', tlsa.detail, { mx: host.name, strings: [] });
    return `DANE: ${tlsa.detail}`;
  }
  const policy = { mx: host.name, strings: tlsaText(name, tlsa.records) };
  let last = '';
  for (const address of host.addresses) {
    if (signal.aborted) return stopped(signal, addresses, last);
    const res = await attemptEach(ctx, { name: host.name, address, port: ctx.config.outbound.mx_port, dane: tlsa.records }, row, addresses, raw, signal);
    if (res.kind === 'replies') {
      tls.success(policy);
      return fromReplies(res, addresses);
    }
    if (signal.aborted) return stopped(signal, addresses, res.host);
    if (res.errorCode === 'EDANE' || res.error.startsWith('DANE:')) {
      const type = /STARTTLS/i.test(res.error) ? 'starttls-not-supported' : res.errorCode === 'EDANE' ? 'tlsa-invalid' : tlsFailureType(res.error);
      tls.failure(type, host.name, address, res.error, policy);
    }
    last = `${res.host}: ${res.error}`;
    ctx.log.warn('mx unreachable', { messageId: row.id, host: res.host, error: res.error });
  }
  return last;
}

/**
 * The message row as the claim left it (null: gone), by the claimed job's row: the attempt
 * that follows the claim starts from it instead of reading it again. A job claimed elsewhere
 * (a test calling claimDue directly) has no entry and reads the row.
 */
const claimedRows = new WeakMap<JobRow, MessageRow | null>();

export const sendHandler: JobHandler = {
  kind: SEND_JOB,
  schedule: (ctx) => ctx.config.outbound.retry_schedule,
  partitionLimit: (ctx) => ctx.config.outbound.concurrency_per_domain,
  async claimed(tx, ctx, job) {
    // Only the displayed status depends on it: a failure here must not stop the claim. (On
    // PostgreSQL a failed statement ends the transaction all the same: the claim rolls back,
    // the store says so, and the jobs are claimed again on the next pass.)
    try {
      const payload = JSON.parse(job.payload) as SendJobPayload;
      claimedRows.set(job, (await markSending(tx, ctx, payload.messageId, payload.recipients)) ?? null);
    } catch (err) {
      ctx.log.error('marking a send as sending failed', { jobId: job.id, ...errorFields(err) });
    }
  },
  async run(ctx, job, signal) {
    const payload = JSON.parse(job.payload) as SendJobPayload;
    const kept = claimedRows.get(job);
    claimedRows.delete(job);
    const row = kept === undefined ? await findOutboundRow(ctx, payload.messageId) : kept;
    if (!row) return ok(); // deleted meanwhile: nothing left to send
    const pending = pendingRecipients(row, payload.recipients);
    if (!pending.length) return ok();

    let results: Result[];
    let delivered: Commit | undefined;
    const tls = new TlsSessions(ctx, payload.domain);
    try {
      if (payload.local) ({ results, commit: delivered } = await deliverLocally(ctx, row, pending));
      else if (row.delivery === 'dry-run') results = all(pending, 'sent', '250 dry-run: accepted without sending (outbound.mode = "dry-run")');
      else results = await deliverRemotely(ctx, row, payload.domain, pending, signal, tls);
    } catch (err) {
      // Something local (the stored source unreadable, …): retried like a temporary failure,
      // so the recipients still end in a final state when the schedule runs out.
      ctx.log.error('send attempt failed locally', { messageId: row.id, ...errorFields(err) });
      results = all(pending, 'deferred', `451 4.3.0 local error: ${(err as Error)?.message ?? String(err)}`.slice(0, 300));
    }

    const deferred = results.filter((r) => r.status === 'deferred');
    const lastAttempt = job.attempts >= job.maxAttempts;
    // Out of attempts: what was still deferred has failed (its last reply is kept).
    const outcomes = lastAttempt ? results.map((r) => (r.status === 'deferred' ? { ...r, status: 'failed' as const } : r)) : results;
    const commit: Commit = async (tx) => {
      await delivered?.(tx);
      await tls.save(tx);
      await recordOutcomes(tx, ctx, row.id, outcomes, kept ?? undefined);
    };
    if (!deferred.length) return ok(commit);
    const reason = `${deferred.length} recipient(s) deferred: ${deferred[0].response}`;
    return lastAttempt ? fail(reason, commit) : retry(reason, commit);
  },
};
