// Reports about our own outbound mail that come back as mail: delivery status notifications
// (RFC 3464, multipart/report; report-type=delivery-status), abuse feedback (RFC 5965 ARF,
// report-type=feedback-report) and the plain-text bounces of MTAs that send no DSN (qmail,
// older Exim, Microsoft's "Undeliverable:" notices).
//
// Only mail that arrives at a per-recipient bounce address with a valid token
// (domain/inbound/bounce-address.ts) can change a message's state, and only for the recipient that
// address was made for: a report that merely quotes a Message-ID is stored as ordinary mail. A
// DSN must come with the null reverse-path (RFC 3464 §2, RFC 5321 §4.5.5). Mail at a bounce
// address that is no report (an out-of-office reply, a DSN from a non-null sender) is refused
// with 550 5.7.1 and stored nowhere (bounce-address.ts).
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import type { BounceTarget } from './bounce-address.ts';
import { INBOUND_REPORT_HANDLERS, type InboundInput } from './inbound.ts';
import type { RecipientOutcome } from '../mail/messages.ts';
import { findOutboundRow, writeMessageState } from '../sending/sending.ts';
import { suppressIn } from '../sending/suppressions.ts';

interface ReportRecipient {
  address: string;
  action: string;
  status: string;
  diagnostic: string;
}

/** Unfolded `Field: value` lines of a delivery-status or feedback-report body. */
function fieldsOf(text: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const line of text.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const m = /^([A-Za-z][A-Za-z0-9-]*):\s*(.*)$/.exec(line);
    if (m) out.push([m[1].toLowerCase(), m[2].trim()]);
    else if (line.trim() === '') out.push(['', '']); // group separator (per-recipient blocks)
  }
  return out;
}

const addressOf = (v: string) =>
  v
    .replace(/^[^;]*;\s*/, '')
    .replace(/^<|>$/g, '')
    .trim();

/** Per-recipient blocks of a delivery-status body (RFC 3464 §2.3). */
function recipientsOf(fields: Array<[string, string]>): ReportRecipient[] {
  const out: ReportRecipient[] = [];
  let cur: Partial<ReportRecipient> & { original?: string } = {};
  const flush = () => {
    const address = cur.address ?? cur.original;
    if (address) out.push({ address, action: (cur.action ?? '').toLowerCase(), status: cur.status ?? '', diagnostic: cur.diagnostic ?? '' });
    cur = {};
  };
  for (const [k, v] of fields) {
    if (k === '') flush();
    else if (k === 'final-recipient') cur.address = addressOf(v);
    else if (k === 'original-recipient') cur.original = addressOf(v);
    else if (k === 'action') cur.action = v;
    else if (k === 'status') cur.status = v;
    // The remote server's own words, with their type ("smtp; 550 5.1.1 …"), as received.
    else if (k === 'diagnostic-code') cur.diagnostic = v;
  }
  flush();
  return out;
}

function reportType(parsed: ParsedMail): string | undefined {
  const ct = parsed.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  if (!ct || ct.value?.toLowerCase() !== 'multipart/report') return undefined;
  return ct.params?.['report-type']?.toLowerCase();
}

/** What is read of each part of a report mail, and of all of them: the fields and the explanation are near their starts. */
const REPORT_PART_CHARS = 64 * 1024;
const REPORT_TEXT_CHARS = 1024 * 1024;

/** Where the machine-readable fields start in mailparser's text: a field only a status report has. */
const FIELDS_START = /^(?:Reporting-MTA|Original-Envelope-Id|Arrival-Date|Final-Recipient|Original-Recipient):/im;

/**
 * mailparser joins the text parts into `text`, the message/delivery-status part among them
 * after the human-readable one, and gives the rest (message/feedback-report, message/rfc822,
 * text/rfc822-headers) as attachments. The fields are read from where they start in the text's
 * first REPORT_TEXT_CHARS (behind a long explanation too), and the start of each attachment;
 * a returned message can be 25 MB of text, and was read before once for each recipient the
 * report was for (18 MB took 1.4 s each).
 */
function reportText(parsed: ParsedMail): string {
  const text = (parsed.text ?? '').slice(0, REPORT_TEXT_CHARS);
  const fields = Math.max(0, text.search(FIELDS_START));
  const parts = parsed.attachments.filter((a) => /^(message|text)\//i.test(a.contentType)).map((a) => a.content.subarray(0, REPORT_PART_CHARS * 4).toString('utf8'));
  return [text.slice(fields), ...parts]
    .map((p) => p.slice(0, REPORT_PART_CHARS))
    .join('\n\n')
    .slice(0, REPORT_TEXT_CHARS);
}

/** A line with an SMTP reply code or an enhanced status code (RFC 3463): the server's own words. */
const CODE_LINE = /\b[45]\d\d[\s:-]|\b[45]\.\d{1,3}\.\d{1,3}\b/;
/** The phrases of Postfix, Exim, qmail, Sendmail and Exchange notices for a failure. */
const FAILURE_PHRASE =
  /user unknown|unknown user|no such (user|mailbox|recipient)|does not exist|doesn't exist|mailbox (is )?(unavailable|full|disabled)|address rejected|unrouteable|could not be delivered|couldn't be delivered|undeliverable|delivery (has )?failed|permanent(ly)? (error|failure)|rejected/i;

/**
 * The lines of a report's human-readable part (the start of mailparser's text), quoting marks
 * and "Field: value" lines left out: mailparser's text also holds the message/delivery-status
 * part, whose fields (and a returned message's headers) are data, not the explanation.
 */
const humanLines = (text: string): string[] =>
  text
    .slice(0, REPORT_PART_CHARS)
    .split(/\r?\n/)
    .map((l) => l.replace(/^[>\s]+/, '').trim())
    .filter((l) => !/^[A-Za-z][A-Za-z0-9-]*:\s/.test(l));

/**
 * The line that says why delivery to `recipient` failed, for a bounce without a
 * Diagnostic-Code: a line with a reply code; else the first line under the one naming the
 * recipient (Exim's "  x@y\n    Unrouteable address", qmail's "<x@y>:\n…"); else the first
 * line with a failure phrase.
 */
function firstFailureLine(lines: string[], recipient: string): string | undefined {
  const pick = (l: string | undefined) => l?.slice(0, 500);
  const coded = lines.find((l) => CODE_LINE.test(l));
  if (coded) return pick(coded);
  const named = lines.findIndex((l) => l.toLowerCase().includes(recipient.toLowerCase()));
  if (named >= 0) {
    const next = lines.slice(named + 1).find((l) => l !== '');
    if (next && !next.includes('@')) return pick(next);
  }
  return pick(lines.find((l) => FAILURE_PHRASE.test(l)));
}

/** Subjects that bounce notices use (Postfix, Exim, qmail, Sendmail, Exchange, Gmail, Yahoo). */
const BOUNCE_SUBJECT =
  /undeliver|undelivered|returned mail|delivery status notification|delivery failure|failure notice|mail delivery failed|delivery has failed|could not be delivered|non[- ]?delivery|nondeliverable/i;

/** An auto-reply (RFC 3834) is not a bounce: it goes to the inbox like any reply. */
const isAutoReply = (parsed: ParsedMail) => /^auto-replied/i.test(String(parsed.headers.get('auto-submitted') ?? ''));

type Verdict = { status: 'bounced'; response: string } | { status: 'complained' } | { status: 'unchanged' } | null;

/** What a report mail says, read once for all the recipients it is for. */
interface Reading {
  type: string | undefined;
  /** The per-recipient blocks of a delivery-status report. */
  blocks: ReportRecipient[];
  lines: string[];
}

const readReport = (parsed: ParsedMail): Reading => {
  const type = reportType(parsed);
  return { type, blocks: type === 'delivery-status' ? recipientsOf(fieldsOf(reportText(parsed))) : [], lines: humanLines(parsed.text ?? '') };
};

/** What one report says about the recipient its bounce address names; null: not a report. */
function verdictFor(parsed: ParsedMail, report: Reading, input: InboundInput, target: BounceTarget): Verdict {
  const { type, blocks } = report;
  if (type === 'delivery-status') {
    // A DSN comes from the null reverse-path; anything else is a message that looks like one.
    if (input.mailFrom !== '') return null;
    const block = blocks.find((b) => b.address.toLowerCase() === target.recipient.toLowerCase()) ?? (blocks.length === 1 ? blocks[0] : undefined);
    // Delayed, delivered, relayed and expanded notices change nothing.
    if (!block || block.action !== 'failed') return { status: 'unchanged' };
    const human = firstFailureLine(report.lines, target.recipient);
    return { status: 'bounced', response: block.diagnostic || human || `${block.status || 'failed'} (delivery status notification)` };
  }
  if (type === 'feedback-report') return { status: 'complained' };
  // A plain-text bounce: from the null reverse-path or a mailer daemon, not an auto-reply, and
  // saying so in its subject or its text.
  if (type !== undefined || isAutoReply(parsed)) return null;
  const from = parsed.from?.value[0]?.address ?? '';
  const daemon = input.mailFrom === '' || /^(mailer-daemon|postmaster)@/i.test(from);
  const line = firstFailureLine(report.lines, target.recipient);
  if (!daemon || !(BOUNCE_SUBJECT.test(parsed.subject ?? '') || line)) return null;
  return { status: 'bounced', response: line ?? (parsed.subject ?? 'bounced').slice(0, 500) };
}

/** The consuming handler registered with prepareInbound. */
export async function handleReport(ctx: AppContext, parsed: ParsedMail, input: InboundInput): Promise<boolean> {
  if (!input.bounces?.length || input.recipients.length) return false;
  // One bounce address can be given at every domain served, and with a trailing dot: the same
  // message and recipient, counted once.
  const targets = [...new Map(input.bounces.map((t) => [`${t.messageId} ${t.recipient.toLowerCase()}`, t])).values()];
  const report = readReport(parsed);
  const verdicts = targets.map((target) => ({ target, verdict: verdictFor(parsed, report, input, target) }));
  if (verdicts.some((v) => v.verdict === null)) return false; // not a report: stored as mail

  const changed: string[] = [];
  await ctx.store.transaction(async (tx) => {
    for (const { target, verdict } of verdicts) {
      // Read inside the transaction, under the message's lock: the state a concurrent attempt
      // or report just wrote.
      await ctx.store.lock(tx, `message-state:${target.messageId}`);
      const row = await findOutboundRow(ctx, target.messageId);
      if (!row || verdict!.status === 'unchanged') continue;
      // A complaint suppresses its recipient (a bounce does so in writeMessageState), even when
      // the message is already `complained` through another recipient.
      if (verdict!.status === 'complained') await suppressIn(ctx, tx, row.accountId, [target.recipient], 'complaint', row.id, ctx.clock.now().toISOString());
      if (row.status === 'complained') continue;
      const list = JSON.parse(row.recipients) as RecipientOutcome[];
      if (verdict!.status === 'bounced') {
        const next = list.map((r) => (r.address.toLowerCase() === target.recipient.toLowerCase() ? { ...r, status: 'bounced', response: verdict!.response } : r));
        if (await writeMessageState(tx, ctx, row, next, 'bounced')) changed.push(row.id);
      } else if (await writeMessageState(tx, ctx, row, list, 'complained')) changed.push(row.id);
    }
  });
  ctx.log.info('report consumed', { messageIds: changed, mailFrom: input.mailFrom });
  // Webhook fan-out may have enqueued jobs in the transaction.
  ctx.notify('jobs');
  return true;
}

INBOUND_REPORT_HANDLERS.push(handleReport);
