// One-click unsubscribe (RFC 8058, RFC 2369). A send with `listUnsubscribe: true` carries
//   List-Unsubscribe: <{public_url}/unsubscribe/{token}>, <mailto:unsubscribe+{token}@{domain}>
//   List-Unsubscribe-Post: List-Unsubscribe=One-Click
// both signed by DKIM (src/outbound/dkim.ts). The token names the message and is an HMAC over it
// and its one recipient (a source is built once per message, so such a send has exactly one
// recipient: the header then names who asked). A POST to the URL, or any mail to the address,
// puts that recipient on the sending account's suppression list (reason `unsubscribe`) with an
// audit entry `suppression.added`. The token stays valid as long as the message is stored.
import { timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../../context.ts';
import { base32Mac, derivedKey } from '../../store/signed-url.ts';
import { insertSuppression } from '../../store/repo/suppressions.ts';
import { recordAudit, SYSTEM_ACTOR } from '../audit/audit.ts';
import { AppError } from '../errors.ts';
import type { MessageRow, RecipientOutcome } from '../mail/messages.ts';
import { isoNow } from '../time.ts';
import { findOutboundRow } from './sending.ts';

/** Local parts with this prefix belong to the unsubscribe handler; no inbox can take one. */
export const UNSUBSCRIBE_PREFIX = 'unsubscribe+';
/** 16 base-32 characters: 80 bits. */
const MAC_CHARS = 16;
const TOKEN = /^([0-9a-z]{10,40})\.([0-9a-v]{16})$/;

/** Keyed with a key of its own, derived from the installation's signing secret (as bounce addresses are). */
const mac = (ctx: AppContext, messageId: string, recipient: string): string => base32Mac(derivedKey(ctx, 'mailroom unsubscribe v1'), `${messageId}\n${recipient.toLowerCase()}`, MAC_CHARS);

/** `<message id without msg_>.<mac>`: only [0-9a-z.], safe in a URL path and a local part (55 of 64 octets). */
export const unsubscribeToken = (ctx: AppContext, messageId: string, recipient: string): string => `${messageId.replace(/^msg_/, '')}.${mac(ctx, messageId, recipient)}`;

/** The two header fields of a message sent from `domain` to `recipient`. */
export function listUnsubscribeHeaders(ctx: AppContext, messageId: string, recipient: string, domain: string): Record<string, string> {
  const token = unsubscribeToken(ctx, messageId, recipient);
  const base = ctx.config.http.public_url.replace(/\/+$/, '');
  return {
    'List-Unsubscribe': `<${base}/unsubscribe/${token}>, <mailto:${UNSUBSCRIBE_PREFIX}${token}@${domain.toLowerCase()}>`,
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
  };
}

/** 400 unless a send asking for the headers has exactly one recipient. */
export function assertOneRecipient(recipients: string[]): void {
  if (recipients.length !== 1) {
    throw new AppError(
      'VALIDATION_ERROR',
      '`listUnsubscribe`: a message with a one-click unsubscribe has exactly one recipient (to, no cc or bcc): the link names who unsubscribes; send one message per recipient',
    );
  }
}

export interface UnsubscribeTarget {
  accountId: string;
  messageId: string;
  recipient: string;
}

/** What a token names, or undefined when it is malformed, forged, or its message is gone. */
export async function readUnsubscribeToken(
  ctx: AppContext,
  token: string,
  find: (id: string) => Promise<MessageRow | undefined> = (id) => findOutboundRow(ctx, id),
): Promise<UnsubscribeTarget | undefined> {
  const m = TOKEN.exec(token.toLowerCase());
  if (!m) return undefined;
  const row = await find(`msg_${m[1]}`);
  if (!row || row.direction !== 'outbound') return undefined;
  const given = Buffer.from(m[2]);
  for (const r of JSON.parse(row.recipients) as RecipientOutcome[]) {
    if (timingSafeEqual(given, Buffer.from(mac(ctx, row.id, r.address)))) return { accountId: row.accountId, messageId: row.id, recipient: r.address.toLowerCase() };
  }
  return undefined;
}

/**
 * Suppresses the recipient a valid token names (reason `unsubscribe`) and audits it; an address
 * already on the list keeps its entry and nothing is audited again. `via`: 'https' or 'mail'.
 */
export async function unsubscribe(ctx: AppContext, target: UnsubscribeTarget, via: 'https' | 'mail'): Promise<{ created: boolean }> {
  return ctx.store.transaction(async (tx) => {
    const created = await insertSuppression(tx, { accountId: target.accountId, address: target.recipient, reason: 'unsubscribe', messageId: target.messageId, createdAt: isoNow(ctx.clock) });
    if (created) await recordAudit(ctx, tx, target.accountId, SYSTEM_ACTOR, 'suppression.added', target.recipient, { reason: 'unsubscribe', messageId: target.messageId, via });
    return { created };
  });
}

/** POST /unsubscribe/{token}: 404 NOT_FOUND for a token that names nothing. */
export async function unsubscribeByToken(ctx: AppContext, token: string): Promise<{ address: string; suppressed: true }> {
  const target = await readUnsubscribeToken(ctx, token);
  if (!target) throw new AppError('NOT_FOUND', 'this unsubscribe link is not valid (or its message was deleted)');
  await unsubscribe(ctx, target, 'https');
  return { address: target.recipient, suppressed: true };
}
