// Per-recipient bounce addresses (VERP): each outbound message goes to each recipient with its
// own envelope sender `bounces+<message>.<token>@<inbox domain>`, where the token is an HMAC
// over the message id and that recipient, keyed with a secret of this data directory. A delivery
// report or complaint changes a message's state only when it arrives at such an address with a
// valid token, and only for the recipient the token was made for: quoting a Message-ID that
// every recipient has seen is no longer enough to mark mail bounced.
//
// Only reports are taken at these addresses: delivery status notifications (RFC 3464,
// multipart/report; report-type=delivery-status, from the null sender), feedback reports (RFC
// 5965 ARF) and the plain-text notices of MTAs that send no DSN, from the null sender or a
// mailer daemon (src/domain/inbound/reports.ts). Anything else gets 550 5.7.1 at the end of DATA
// and nothing is stored: every recipient sees the address in Return-Path, so delivering what
// comes there would be a way into the inbox around its allow list.
import { timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../../context.ts';
import { base32Mac, derivedKey } from '../../store/signed-url.ts';
import { splitAddress } from '../addresses.ts';
import { AppError } from '../errors.ts';
import type { MessageRow, RecipientOutcome } from '../mail/messages.ts';

/** Local parts with this prefix belong to the bounce handler; no inbox can take one. */
export const BOUNCE_PREFIX = 'bounces+';
/** 12 base-32 characters: 60 bits, far beyond guessing at SMTP speed. */
const TOKEN_CHARS = 12;

export interface BounceTarget {
  /** The outbound message the report is about. */
  messageId: string;
  /** Its recipient the bounce address was made for (as listed on the message). */
  recipient: string;
  /** The inbox that sent it. */
  inboxId: string;
}

/** A key of its own, derived from the installation's signing secret (never the URL key itself). */
const token = (ctx: AppContext, messageId: string, recipient: string): string => base32Mac(derivedKey(ctx, 'mailroom bounce addresses v1'), `${messageId}\n${recipient.toLowerCase()}`, TOKEN_CHARS);

/** The envelope sender for `recipient` of an outbound message sent from `fromAddress`. */
export function bounceAddress(ctx: AppContext, row: Pick<MessageRow, 'id' | 'fromAddress'>, recipient: string): string {
  const domain = splitAddress(row.fromAddress)?.domain ?? ctx.config.shared_domain;
  // Only [0-9a-z.+]: survives MTAs that lowercase or re-quote local parts; 47 of the 64 octets.
  return `${BOUNCE_PREFIX}${row.id.replace(/^msg_/, '')}.${token(ctx, row.id, recipient)}@${domain.toLowerCase()}`;
}

/** The refusal (SMTP 550 5.7.1) of mail at a bounce address that is no report. */
export const notAReport = (): AppError => new AppError('FORBIDDEN', 'only delivery status and feedback reports are accepted at this address');

/** True when a local part is in the bounce handler's namespace (valid or not). */
export const isBounceLocalPart = (local: string): boolean => local.toLowerCase().startsWith(BOUNCE_PREFIX);

/**
 * What a bounce address names, or undefined when it is not one of ours or its token is wrong.
 * `findMessage` reads the outbound message by id (the caller's storage access).
 */
export async function readBounceAddress(ctx: AppContext, local: string, findMessage: (id: string) => Promise<MessageRow | undefined>): Promise<BounceTarget | undefined> {
  const m = /^bounces\+([0-9a-z]{10,40})\.([0-9a-v]{12})$/.exec(local.toLowerCase());
  if (!m) return undefined;
  const row = await findMessage(`msg_${m[1]}`);
  if (!row || row.direction !== 'outbound') return undefined;
  const given = Buffer.from(m[2]);
  for (const r of JSON.parse(row.recipients) as RecipientOutcome[]) {
    if (timingSafeEqual(given, Buffer.from(token(ctx, row.id, r.address)))) return { messageId: row.id, recipient: r.address, inboxId: row.inboxId };
  }
  return undefined;
}
