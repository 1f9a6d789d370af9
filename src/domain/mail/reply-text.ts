// The new content of a reply (Message.extractedText / extractedHtml): the body without the
// quoted history and the signature. Plain text: our own rules find the attribution line
// ("On … wrote:" in en, de, fr, es, it, pt, nl, sv, da, pl), Outlook's header block ("From: …
// Sent: …", localized) and "-----Original Message-----" markers; planer (a port of Mailgun's
// talon) then cuts `>` quotation blocks; our rules drop the "-- " signature and mobile
// footers. HTML: the quote containers mail clients write (Gmail's gmail_quote, Apple Mail's and
// Thunderbird's blockquote type="cite", Outlook's divRplyFwdMsg / border-top header block,
// Yahoo's yahoo_quoted) and signature containers are cut out with htmlparser2's positions.
//
// Every rule works line by line or tag by tag with bounded patterns (linear time); anything
// unexpected falls back to the whole body, and so does a cut that leaves nothing.
import { Parser } from 'htmlparser2';
import planer from 'planer';

/**
 * Bodies longer than this (characters) are returned whole: the rules run in linear time, but
 * bodies crafted to be slow cost ~0.3 µs a character (a review measured 100–170 ms at 512 KB),
 * and every message view runs them (src/domain/mail/messages.ts keeps the results).
 */
const MAX_BODY = 128 * 1024;
/** planer reads at most 1,000 lines (and drops the rest); longer texts skip it. */
const PLANER_MAX_LINES = 1000;
/** Lines longer than this are never an attribution or a header line. */
const MAX_MARKER_LINE = 400;

// --- plain text ---------------------------------------------------------------------------

// "On <date>, <name> wrote:" by language: how the line starts, and the verb it ends with or
// (de, nl, sv, da: "Am <date> schrieb <name>:") carries before a final colon.
const ATTRIBUTION: RegExp[] = [
  /^(?:on|le|el|il|il giorno|in data|em|no dia|op|am|den|w dniu|dnia)\s.*(?:wrote|a \u00e9crit|escribi\u00f3|ha scritto|escreveu|schreef|schrieb|skrev|napisa\u0142(?:\(a\))?|pisze)\s*:?$/i,
  /^(?:am|op|den|d\.)\s.*\b(?:schrieb|schreef|skrev)\b.*:$/i,
  // Outlook for Mac and some webmails: "<name> <<email>> schrieb am <date>:" / "<name> wrote:".
  /^.{1,120}<[^<>\s]+@[^<>\s]+>\s*(?:wrote|schrieb|a \u00e9crit|escribi\u00f3|ha scritto|escreveu|schreef)\b.*:$/i,
];

/** "-----Original Message-----" and its translations (Outlook, Lotus, webmails). */
const ORIGINAL_MESSAGE =
  /^\s*-{2,}\s*(?:original message|urspr\u00fcngliche nachricht|message d'origine|mensaje original|messaggio originale|mensagem original|oorspronkelijk bericht|originalmeddelande|oprindelig meddelelse|wiadomo\u015b\u0107 oryginalna)\s*-{2,}\s*$/i;
const FORWARDED =
  /^\s*-{2,}\s*(?:forwarded message|weitergeleitete nachricht|message transf\u00e9r\u00e9|mensaje reenviado|messaggio inoltrato|mensagem encaminhada|doorgestuurd bericht)\s*-{2,}\s*$/i;

/** The first line of Outlook's header block of the quoted message ("From: …", bold in HTML). */
const HEADER_FROM = /^\s*\*?(?:from|von|de|da|van|fr\u00e5n|fra|od|l\u00e4hett\u00e4j\u00e4)\s?:\*?\s*\S/i;
/** Another header line within the next few lines confirms the block. */
const HEADER_OTHER =
  /^\s*\*?(?:sent|date|to|cc|subject|gesendet|datum|an|betreff|envoy\u00e9|\u00e0|objet|enviado(?: el)?|enviada em|fecha|para|asunto|inviato|data|a|oggetto|verzonden|aan|onderwerp|assunto|skickat|till|\u00e4mne|sendt|til|emne)\s?:\*?(?:\s|$)/i;
/** The rule Outlook draws above that block in plain text. */
const RULE = /^\s*(?:_{10,}|-{10,})\s*$/;

const QUOTED = /^\s*>/;
const BLANK = /^\s*$/;

/** RFC 3676 §4.3 "-- " (and the "--" many clients leave after stripping trailing spaces). */
const SIGNATURE_DASHES = /^--\s?$/;
/** What phones and apps append: "Sent from my iPhone", "Von meinem iPhone gesendet", … */
const MOBILE_FOOTER =
  /^(?:sent from (?:my |mail for |yahoo mail|outlook)|sent with |get outlook for |von meinem .{1,40} gesendet|gesendet von (?:meinem|mail f\u00fcr)|envoy\u00e9 (?:de|depuis) (?:mon|ma|l'application|outlook|yahoo)|obtenir outlook pour|enviado (?:desde|do|de) (?:mi|meu|o|el|outlook|yahoo)|inviato da |scarica outlook per|verzonden (?:vanaf|met|van) |verstuurd vanaf |skickat fr\u00e5n |sendt fra )/i;

/** `wrapped`: several lines joined; then only the patterns anchored on a first word apply. */
const isAttribution = (line: string, wrapped = false) => (wrapped ? ATTRIBUTION.slice(0, 2) : ATTRIBUTION).some((re) => re.test(line));

/** Index of the line the quoted history starts at, by our own rules; -1 when none. */
function historyStart(lines: string[]): number {
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.length > MAX_MARKER_LINE || BLANK.test(line)) continue;
    if (ORIGINAL_MESSAGE.test(line) || FORWARDED.test(line)) return i;
    // An attribution, possibly wrapped over up to three lines (Gmail wraps at 78 characters).
    let joined = '';
    for (let j = i; j < Math.min(i + 3, lines.length) && !QUOTED.test(lines[j]) && !BLANK.test(lines[j]); j++) {
      joined = (joined + ' ' + lines[j].trim()).trim();
      if (joined.length > MAX_MARKER_LINE) break;
      // A date in it is enough (Yahoo quotes without `>`); else a quotation must follow.
      if (isAttribution(joined, j > i) && (/\d/.test(joined) || quotationFollows(lines, j + 1))) return i;
    }
    if (HEADER_FROM.test(line) && headerBlockFollows(lines, i + 1)) return i > 0 && RULE.test(lines[i - 1]) ? i - 1 : i;
  }
  return -1;
}

function quotationFollows(lines: string[], from: number): boolean {
  let i = from;
  while (i < lines.length && BLANK.test(lines[i])) i++;
  return i < lines.length && QUOTED.test(lines[i]);
}

function headerBlockFollows(lines: string[], from: number): boolean {
  let seen = 0;
  for (let i = from; i < Math.min(from + 6, lines.length); i++) {
    if (HEADER_OTHER.test(lines[i])) seen++;
  }
  return seen >= 1;
}

/**
 * Where the `>` quotation that ends the text starts (quoted and blank lines up to the end), or
 * the text's length when it does not end with one. Answers written between quoted lines above
 * it (inline replies) stay with the quotes they answer.
 */
function trailingQuotation(lines: string[]): number {
  let start = lines.length;
  while (start > 0 && (QUOTED.test(lines[start - 1]) || BLANK.test(lines[start - 1]))) start--;
  return lines.slice(start).some((l) => QUOTED.test(l)) ? start : lines.length;
}

/** Drops the signature: from a "-- " line on, or a trailing mobile footer. */
function dropSignature(lines: string[]): string[] {
  const dashes = lines.findIndex((l) => SIGNATURE_DASHES.test(l));
  let out = dashes >= 0 ? lines.slice(0, dashes) : lines;
  let last = out.length - 1;
  while (last >= 0 && BLANK.test(out[last])) last--;
  if (last >= 0 && out[last].length < 120 && MOBILE_FOOTER.test(out[last].trim())) out = out.slice(0, last);
  return out;
}

const trimEnd = (lines: string[]) => {
  let end = lines.length;
  while (end > 0 && BLANK.test(lines[end - 1])) end--;
  return lines.slice(0, end).map((l) => l.trimEnd());
};

/**
 * talon's cut of the `>` quotation (planer's processMarkedLines: the quoted block, unless
 * replies are written between its lines), with each line marked here rather than by planer's
 * own markMessageLines: its splitter patterns are unanchored and backtrack over long lines (a
 * line of "a" and 131,070 spaces took 54 s, 326 lines of "On ," 11.7 s). Most splitters it
 * looks for (attribution lines, Outlook headers, "Original Message") were cut by historyStart
 * already; the date ones are marked here with anchored patterns on lines of bounded length.
 */
/**
 * talon's one-line splitters that historyStart does not know, anchored (planer's are not):
 * "08.01.2024, 10:15, "Bob" <bob@example.com>:" (Yandex, Mail.ru) and "Mon, 8 Jan 2024 10:15
 * Bob Smith <bob@example.com>:".
 */
const DATE_SPLITTERS = [/^(?:\d+\/\d+\/\d+|\d+\.\d+\.\d+).*@/, /^\S{3,10}, \d\d? \S{3,10} 20\d\d,? \d\d?:\d\d(?::\d\d)?(?: \S+){3,6}@\S+:/];

function cutQuotation(lines: string[]): string[] {
  const mark = (l: string) => {
    if (BLANK.test(l)) return 'e';
    if (l.startsWith('>')) return 'm';
    if (l.length > MAX_MARKER_LINE) return 't';
    return FORWARDED.test(l) ? 'f' : DATE_SPLITTERS.some((re) => re.test(l)) ? 's' : 't';
  };
  const markers = lines.map(mark).join('');
  const flags: { wereLinesDeleted?: boolean; firstLine?: number; lastLine?: number } = {};
  planer.processMarkedLines(lines, markers, flags);
  if (!flags.wereLinesDeleted || flags.firstLine === undefined || flags.lastLine === undefined) return lines;
  return [...lines.slice(0, flags.firstLine), ...lines.slice(flags.lastLine)];
}

/** The new content of a plain-text reply; the whole text when nothing is found or nothing would be left. */
export function replyText(text: string): string {
  if (text.length > MAX_BODY) return text;
  try {
    let lines = text.replace(/\r\n?/g, '\n').split('\n');
    const start = historyStart(lines);
    if (start >= 0) lines = lines.slice(0, start);
    if (lines.length <= PLANER_MAX_LINES) lines = cutQuotation(lines);
    lines = lines.slice(0, trailingQuotation(lines));
    const out = trimEnd(dropSignature(lines))
      .join('\n')
      .replace(/^\s*\n/, '');
    return out.trim() ? out : text;
  } catch {
    return text;
  }
}

// --- HTML ---------------------------------------------------------------------------------

const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'param', 'source', 'track', 'wbr']);

const classes = (attribs: Record<string, string>) => ` ${(attribs.class ?? '').toLowerCase()} `;

/** An element where the quoted history starts: everything from it to the end goes. */
function isQuoteStart(name: string, attribs: Record<string, string>): boolean {
  const cls = classes(attribs);
  const id = (attribs.id ?? '').toLowerCase();
  if (cls.includes(' gmail_quote ') || cls.includes(' gmail_quote_container ') || cls.includes(' yahoo_quoted ') || cls.includes(' moz-cite-prefix ')) return true;
  if (cls.includes(' outlookmessageheader ') || cls.includes(' zmail_extra ') || cls.includes(' protonmail_quote ')) return true;
  if (id === 'appendonsend' || id === 'divrplyfwdmsg' || id === 'mail-editor-reference-message-container' || id === 'olk_src_body_section') return true;
  if (name === 'blockquote' && (attribs.type ?? '').toLowerCase() === 'cite') return true;
  // Outlook desktop: the quoted message's header block sits in a div with a top border only.
  if (name === 'div' && /border:\s*none;\s*border-top:\s*solid/i.test(attribs.style ?? '')) return true;
  return false;
}

/** An element holding a signature: it goes (with what is inside it), the rest stays. */
function isSignature(attribs: Record<string, string>): boolean {
  const cls = classes(attribs);
  const id = (attribs.id ?? '').toLowerCase();
  return (
    cls.includes(' gmail_signature ') ||
    cls.includes(' gmail_signature_prefix ') ||
    cls.includes(' moz-signature ') ||
    id === 'signature' ||
    id === 'applemailsignature' ||
    id === 'ms-outlook-mobile-signature'
  );
}

const MAX_DEPTH = 500;
const BLOCKS = new Set(['div', 'p', 'span', 'font', 'td', 'li']);

interface Open {
  name: string;
  start: number;
  /** Text seen inside it so far (for attribution lines written as plain text in a div). */
  text: string;
}

/**
 * Where the history starts and which signature ranges go, from one pass of htmlparser2's
 * tokenizer (positions in the source; nothing is re-serialized, so the markup kept is the
 * sender's own).
 */
function scanHtml(html: string): { cut: number; openAtCut: string[]; drop: Array<[number, number]> } {
  const stack: Open[] = [];
  const drop: Array<[number, number]> = [];
  let cut = -1;
  let openAtCut: string[] = [];
  let signatureDepth = -1;
  // The last element closed with nothing visible after it: an <hr> or empty div right before
  // Outlook's header block goes with it.
  let lastRule = -1;
  const parser = new Parser(
    {
      onopentag(name, attribs) {
        if (cut >= 0) return;
        const start = parser.startIndex;
        if (signatureDepth < 0 && isQuoteStart(name, attribs)) {
          cut = lastRule >= 0 ? lastRule : start;
          openAtCut = stack.map((o) => o.name);
          return;
        }
        if (name === 'hr') lastRule = start;
        if (!VOID.has(name)) {
          // Mail is never this deep; a body that is gets no extraction (and no quadratic walk).
          if (stack.length >= MAX_DEPTH) throw new Error('too deeply nested');
          stack.push({ name, start, text: '' });
          if (signatureDepth < 0 && isSignature(attribs)) signatureDepth = stack.length;
        }
      },
      ontext(data) {
        if (cut >= 0) return;
        if (/\S/.test(data.replace(/&nbsp;|\u00a0/g, ''))) lastRule = -1;
        const top = stack[stack.length - 1];
        if (top && top.text.length < MAX_MARKER_LINE) top.text += data;
      },
      onclosetag(name, implied) {
        if (cut >= 0) return;
        let at = stack.length - 1;
        while (at >= 0 && stack[at].name !== name) at--;
        if (at < 0) return;
        const closed = stack[at];
        const end = implied ? parser.startIndex : parser.endIndex + 1;
        const line = decodeBasic(closed.text).replace(/\s+/g, ' ').trim();
        if (signatureDepth < 0 && BLOCKS.has(name) && line.length < 120 && MOBILE_FOOTER.test(line)) {
          // "Sent from my iPhone" in a block of its own.
          drop.push([closed.start, end]);
        } else if (signatureDepth > 0 && at + 1 <= signatureDepth) {
          if (at + 1 === signatureDepth) drop.push([closed.start, end]);
          signatureDepth = -1;
        } else if (signatureDepth < 0 && BLOCKS.has(name)) {
          // An attribution line in a block of its own, followed by the quotation: cut from it.
          if (line && line.length <= MAX_MARKER_LINE && ((isAttribution(line) && /\d/.test(line)) || ORIGINAL_MESSAGE.test(line))) {
            cut = closed.start;
            openAtCut = stack.slice(0, at).map((o) => o.name);
          }
        }
        stack.length = at;
        const parent = stack[stack.length - 1];
        if (parent && parent.text.length < MAX_MARKER_LINE) parent.text += ' ' + closed.text;
      },
    },
    { decodeEntities: false, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  return { cut, openAtCut, drop };
}

const decodeBasic = (s: string) =>
  s
    .replace(/&nbsp;/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');

/** True when the HTML shows no text: only tags, whitespace, &nbsp;, scripts and styles. */
function isBlankHtml(html: string): boolean {
  let visible = false;
  let hidden = 0;
  const parser = new Parser({
    onopentag: (name) => void (name === 'script' || name === 'style' || name === 'head' ? hidden++ : 0),
    onclosetag: (name) => void (name === 'script' || name === 'style' || name === 'head' ? hidden-- : 0),
    ontext: (data) => void (hidden <= 0 && /[^\s\u00a0]/.test(data) ? (visible = true) : 0),
  });
  parser.write(html);
  parser.end();
  return !visible;
}

/** The new content of an HTML reply; the whole HTML when nothing is found or nothing would be left. */
export function replyHtml(html: string): string {
  if (html.length > MAX_BODY) return html;
  try {
    const { cut, openAtCut, drop } = scanHtml(html);
    if (cut < 0 && drop.length === 0) return html;
    const end = cut >= 0 ? cut : html.length;
    let out = '';
    let at = 0;
    for (const [from, to] of drop) {
      if (from >= end) break;
      out += html.slice(at, from);
      at = Math.min(to, end);
    }
    out += html.slice(at, end);
    // Close what was open where the history started, innermost first.
    if (cut >= 0)
      out += openAtCut
        .reverse()
        .map((name) => `</${name}>`)
        .join('');
    return isBlankHtml(out) ? html : trimTrailingBreaks(out);
  } catch {
    return html;
  }
}

/**
 * Empty lines the client left above the quotation: trailing <br>s, &nbsp; and empty elements,
 * peeled off the end (the closing tags of non-empty elements are kept). Looks at the last few
 * hundred characters at a time only: no pattern ever scans the whole body.
 */
function trimTrailingBreaks(html: string): string {
  let body = html;
  let closers = '';
  for (let i = 0; i < 200; i++) {
    body = body.trimEnd();
    if (body.endsWith('&nbsp;')) {
      body = body.slice(0, -6);
      continue;
    }
    const tail = body.slice(-300);
    const br = /<br\b[^<>]*>$/i.exec(tail);
    if (br) {
      body = body.slice(0, body.length - br[0].length);
      continue;
    }
    // An element left empty once its breaks went: it goes too.
    const opened = /<([a-z0-9:-]+)(?:\s[^<>]*)?>$/i.exec(tail);
    if (opened && !VOID.has(opened[1].toLowerCase()) && closers.toLowerCase().startsWith(`</${opened[1].toLowerCase()}`)) {
      body = body.slice(0, body.length - opened[0].length);
      closers = closers.slice(closers.indexOf('>') + 1);
      continue;
    }
    const close = /<\/([a-z0-9:-]+)\s*>$/i.exec(tail);
    if (!close) break;
    const inner = body.slice(0, body.length - close[0].length);
    const open = new RegExp(`<${close[1]}(?:\\s[^<>]*)?>$`, 'i').exec(inner.slice(-300));
    if (open) body = inner.slice(0, inner.length - open[0].length);
    else {
      closers = close[0] + closers;
      body = inner;
    }
  }
  return body + closers;
}
