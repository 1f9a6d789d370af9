// Reports about our own outbound mail that come back as mail: delivery status notifications
// (RFC 3464, multipart/report; report-type=delivery-status) and abuse feedback (RFC 5965 ARF,
// report-type=feedback-report). One that names a message an inbox sent marks it `bounced` or
// `complained` (counters, event) and is consumed: it is not stored as an ordinary message.
//
// Outbound mail uses the inbox's own address as envelope sender, so reports arrive at that
// inbox through the normal SMTP listener; the message is found by ENVID (Original-Envelope-Id,
// RFC 3461 — we send our message id), or by the Message-ID in the returned headers.
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../context.ts';
import { INBOUND_REPORT_HANDLERS } from './inbound.ts';
import type { InboxRow } from './inboxes.ts';
import type { RecipientOutcome } from './messages.ts';
import { findOutboundByRefs, writeMessageState } from './sending.ts';
import { messageIdsIn } from './threads.ts';

interface ReportRecipient {
  address: string;
  action: string;
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

/** Per-recipient blocks of a delivery-status body (RFC 3464 §2.3). */
function recipientsOf(fields: Array<[string, string]>): ReportRecipient[] {
  const out: ReportRecipient[] = [];
  let cur: Partial<ReportRecipient> | undefined;
  const flush = () => {
    if (cur?.address) out.push({ address: cur.address, action: (cur.action ?? '').toLowerCase(), diagnostic: cur.diagnostic ?? '' });
    cur = undefined;
  };
  for (const [k, v] of fields) {
    if (k === '') flush();
    else if (k === 'final-recipient' || k === 'original-recipient') {
      const address = v.replace(/^[^;]*;\s*/, '').replace(/^<|>$/g, '').trim();
      if (k === 'final-recipient' || !cur?.address) (cur ??= {}).address = address;
    } else if (k === 'action') (cur ??= {}).action = v;
    else if (k === 'diagnostic-code') (cur ??= {}).diagnostic = v.replace(/^[^;]*;\s*/, '');
    else if (k === 'status' && !cur?.diagnostic) (cur ??= {}).diagnostic = v;
  }
  flush();
  return out;
}

function reportType(parsed: ParsedMail): string | undefined {
  const ct = parsed.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  if (!ct || ct.value?.toLowerCase() !== 'multipart/report') return undefined;
  return ct.params?.['report-type']?.toLowerCase();
}

/** The consuming handler registered with acceptInbound. */
export async function handleReport(ctx: AppContext, parsed: ParsedMail, recipients: InboxRow[]): Promise<boolean> {
  const type = reportType(parsed);
  if (type !== 'delivery-status' && type !== 'feedback-report') return false;

  // mailparser gives message/delivery-status as text and the other parts as attachments.
  const parts = [parsed.text ?? '', ...parsed.attachments.filter((a) => /^(message|text)\//i.test(a.contentType)).map((a) => a.content.toString('utf8'))];
  const all = parts.join('\n\n');
  const fields = fieldsOf(all);
  const envIds = fields.filter(([k]) => k === 'original-envelope-id').map(([, v]) => v.trim());
  const returnedIds = messageIdsIn(...[...all.matchAll(/^message-id:\s*(<[^<>\s]+>)/gim)].map((m) => m[1]));
  const rows = findOutboundByRefs(
    ctx,
    recipients.map((r) => r.id),
    { messageIds: returnedIds, ids: envIds.filter((v) => /^msg_[0-9a-z]+$/.test(v)) },
  );
  if (!rows.length) return false; // not about our mail: stored as an ordinary message

  if (type === 'delivery-status') {
    const failed = recipientsOf(fields).filter((r) => r.action === 'failed');
    // Delayed/delivered/relayed notices change nothing: the message stays as it is.
    ctx.db.transaction((tx) => {
      for (const row of rows) {
        if (!failed.length || row.status === 'bounced' || row.status === 'complained') continue;
        const list = (JSON.parse(row.recipients) as RecipientOutcome[]).map((r) => {
          const f = failed.find((x) => x.address.toLowerCase() === r.address.toLowerCase());
          return f ? { ...r, status: 'bounced', response: f.diagnostic || 'bounced (delivery status notification)' } : r;
        });
        writeMessageState(tx, ctx, row, list, 'bounced');
      }
    });
  } else {
    ctx.db.transaction((tx) => {
      for (const row of rows) {
        if (row.status === 'complained') continue;
        writeMessageState(tx, ctx, row, JSON.parse(row.recipients) as RecipientOutcome[], 'complained');
      }
    });
  }
  ctx.log.info('report consumed', { type, messageIds: rows.map((r) => r.id) });
  // Webhook fan-out may have enqueued jobs in the transaction.
  ctx.notify('jobs');
  return true;
}

INBOUND_REPORT_HANDLERS.push(handleReport);
