// The part of a message a person sees, for the messages the screener found hidden text in:
// extractedText/extractedHtml (src/domain/mail/messages.ts) and MCP answers carry it instead of
// the bodies as sent. Worked out on read from the stored bodies (as reply extraction is) and
// cached with it, so the stored message stays exactly what was received.
import { convert } from 'html-to-text';
import { readHtml } from './hidden.ts';
import type { Screening } from './screen.ts';

export const hasHiddenText = (s: Screening | null | undefined): boolean => !!s?.reasons.some((r) => r.code === 'hidden_text');

/** The HTML without its hidden elements, and the text: from that HTML when there is one (the text part a client derived from it held the hidden words too). */
export function visibleBodies(text: string | null, html: string | null): { text: string | null; html: string | null } {
  if (html === null) return { text, html };
  const visibleHtml = readHtml(html).visibleHtml;
  return { html: visibleHtml, text: convert(visibleHtml, { wordwrap: false, selectors: [{ selector: 'img', format: 'skip' }] }) };
}

/** A message as an agent is handed it (MCP): bodies without what the screener found hidden. */
export function withoutHidden<M extends { screening?: Screening | null; bodyText: string | null; bodyHtml: string | null }>(m: M): M {
  if (!hasHiddenText(m.screening)) return m;
  const shown = visibleBodies(m.bodyText, m.bodyHtml);
  return { ...m, bodyText: shown.text, bodyHtml: shown.html };
}
