// The part of a message a person sees, for the messages the screener found hidden text in:
// extractedText/extractedHtml (src/domain/mail/messages.ts) and MCP answers carry it instead of
// the bodies as sent. Worked out on read from the stored bodies (as reply extraction is) and
// cached with it, so the stored message stays exactly what was received.
import { convert } from 'html-to-text';
import { readHtml } from './hidden.ts';
import type { Screening } from './screen.ts';

/**
 * Characters of the HTML read for the visible part. It is worked out on the main thread at every
 * message view (GET /messages/{id}, list pages, MCP), so it is bounded as reply extraction is
 * (src/domain/mail/reply-text.ts): past this, the visible part is that of the first
 * VISIBLE_MAX_CHARS characters only, and the rest is not shown, since what it hides is not read
 * (showing it whole would show the hidden text). bodyHtml keeps the whole message.
 */
export const VISIBLE_MAX_CHARS = 128 * 1024;

export const hasHiddenText = (s: Screening | null | undefined): boolean => !!s?.reasons.some((r) => r.code === 'hidden_text');

/**
 * The HTML without its hidden elements, and the text: from that HTML when there is one (the text
 * part a client derived from it held the hidden words too). Of the first VISIBLE_MAX_CHARS
 * characters of the HTML only.
 */
export function visibleBodies(text: string | null, html: string | null): { text: string | null; html: string | null } {
  if (html === null) return { text, html };
  const visibleHtml = readHtml(html.slice(0, VISIBLE_MAX_CHARS)).visibleHtml;
  return { html: visibleHtml, text: convert(visibleHtml, { wordwrap: false, selectors: [{ selector: 'img', format: 'skip' }] }) };
}

/** Reasons whose detail quotes text written to steer an agent: withheld from agents. */
const QUOTES_ATTACK = new Set(['prompt_injection', 'hidden_text']);
const WITHHELD = 'the offending text is withheld from agents (GET /messages/{id} shows it to a person)';

/**
 * A message as an agent is handed it (MCP): bodies without what the screener found hidden, and
 * no reason quoting the injected or hidden text back to it.
 */
export function withoutHidden<M extends { screening?: Screening | null; bodyText: string | null; bodyHtml: string | null }>(m: M): M {
  if (!m.screening?.reasons.some((r) => QUOTES_ATTACK.has(r.code))) return m;
  const screening = { ...m.screening, reasons: m.screening.reasons.map((r) => (QUOTES_ATTACK.has(r.code) ? { code: r.code, detail: WITHHELD } : r)) };
  if (!hasHiddenText(m.screening)) return { ...m, screening };
  const shown = visibleBodies(m.bodyText, m.bodyHtml);
  return { ...m, screening, bodyText: shown.text, bodyHtml: shown.html };
}
