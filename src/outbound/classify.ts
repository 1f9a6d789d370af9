// What a remote SMTP reply (or a failure to get one) means for a recipient: try again later or
// give up (bounce). The rules are a data table, read top to bottom, first match wins — like
// zone-mta's bounces.txt — so adding a provider's quirk is one line, not another `if`.

export type Action = 'retry' | 'bounce';

export interface Verdict {
  action: Action;
  /** Short machine-readable reason, e.g. 'unknown-user', 'greylisted', 'network'. */
  category: string;
}

export interface ReplyInfo {
  /** The SMTP reply code (250, 451, 550…), when the server answered. */
  code?: number;
  /** The full reply text (with the code), or an error message when there was no reply. */
  response?: string;
  /** Client-side error code when there was no usable reply (ECONNECTION, ETIMEDOUT, …). */
  errorCode?: string;
}

interface Rule {
  /** Which text to test: the reply text, or the client error code. */
  on: 'reply' | 'error';
  /** Only replies whose code matches, e.g. /^5/; omit for any. */
  code?: RegExp;
  pattern: RegExp;
  action: Action;
  category: string;
}

/**
 * Ordered rules. RFC 5321 §4.2.1: 4yz is transient, 5yz permanent; RFC 3463 enhanced codes
 * refine that. The first rows catch servers that answer 5yz for conditions that pass with
 * time (greylisting, rate limits, full mailboxes), which the big mailbox providers do.
 */
export const REPLY_RULES: readonly Rule[] = [
  // No reply at all: the connection failed or dropped. Always worth another attempt.
  { on: 'error', pattern: /^(ECONNECTION|ETIMEDOUT|ESOCKET|ECONNRESET|ECONNREFUSED|EDNS|ETLS|EPROTOCOL|EHOSTUNREACH|ENETUNREACH|UPGRADE_TIMEOUT)$/, action: 'retry', category: 'network' },
  { on: 'reply', pattern: /greylist|grey-list|graylist/i, action: 'retry', category: 'greylisted' },
  { on: 'reply', code: /^5/, pattern: /try (again )?later|temporar(il)?y|too many (connections|messages|recipients)|rate limit|throttl/i, action: 'retry', category: 'rate-limited' },
  // RFC 3463 X.2.2 "mailbox full" is meant to be transient even when sent with a 5 (§3.3).
  { on: 'reply', code: /^5/, pattern: /\b5\.2\.2\b|mailbox (is )?full|over ?quota|quota exceeded/i, action: 'retry', category: 'mailbox-full' },
  {
    on: 'reply',
    code: /^5/,
    pattern: /\b5\.1\.[0-36]\b|unknown user|user unknown|no such (user|mailbox|recipient)|does not exist|recipient rejected|address rejected/i,
    action: 'bounce',
    category: 'unknown-user',
  },
  { on: 'reply', code: /^5/, pattern: /\b5\.1\.10\b|null mx/i, action: 'bounce', category: 'null-mx' },
  { on: 'reply', code: /^5/, pattern: /\b5\.2\.1\b|disabled|inactive|suspended/i, action: 'bounce', category: 'mailbox-disabled' },
  { on: 'reply', code: /^5/, pattern: /\b5\.7\.\d+\b|spam|blocked|blacklist|blocklist|policy|dmarc|spf|dkim/i, action: 'bounce', category: 'policy' },
  { on: 'reply', code: /^5/, pattern: /\b5\.3\.4\b|too (large|big)|size/i, action: 'bounce', category: 'message-too-large' },
  { on: 'reply', code: /^5/, pattern: /[\s\S]*/, action: 'bounce', category: 'rejected' },
  { on: 'reply', code: /^4/, pattern: /[\s\S]*/, action: 'retry', category: 'deferred' },
  // A 2yz/3yz where a final answer was expected, or something we cannot read: try again.
  { on: 'reply', pattern: /[\s\S]*/, action: 'retry', category: 'unexpected' },
];

export function classifyReply(info: ReplyInfo): Verdict {
  const code = info.code ? String(info.code) : '';
  for (const rule of REPLY_RULES) {
    if (rule.on === 'error') {
      if (!code && info.errorCode && rule.pattern.test(info.errorCode)) return { action: rule.action, category: rule.category };
      continue;
    }
    if (!code) continue;
    if (rule.code && !rule.code.test(code)) continue;
    if (rule.pattern.test(info.response ?? '')) return { action: rule.action, category: rule.category };
  }
  // No code and no known client error: something local went wrong mid-attempt.
  return { action: 'retry', category: 'network' };
}
