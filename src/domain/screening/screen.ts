// The built-in screener (PRODUCT.md "Screening of inbound mail"): a verdict, a score and the
// reasons, each with the offending text, for one parsed message. Pure and synchronous: it runs on
// the analysis workers after parsing and SPF/DKIM/DMARC (src/domain/inbound/analysis-worker.ts),
// never on the main thread. The rules are data (./rules.ts); public-suffix questions go to tldts
// (the list mailauth already pins); HTML is read with htmlparser2 (./hidden.ts).
import { getDomain, parse as parseHost } from 'tldts';
import { domainToUnicode } from 'node:url';
import { isUtf8 } from 'node:buffer';
import { readHtml } from './hidden.ts';
import {
  ARCHIVE_EXTENSIONS,
  ATTACHMENT_WEIGHT,
  AUTH_FAILED_WEIGHT,
  BASE64_BLOCK,
  CONFUSABLES,
  DANGEROUS_EXTENSIONS,
  DANGEROUS_TYPES,
  DETAIL_CHARS,
  DOMAIN_SWAPS,
  ENFORCED_DMARC,
  HIDDEN_TEXT_REVIEW_CHARS,
  HIDDEN_WEIGHT,
  IMPERSONATION_WEIGHT,
  INJECTION_RULES,
  INVISIBLE_CHARS,
  LINK_WEIGHT,
  MAX_DECODED_BLOCKS,
  MAX_LINKS,
  MAX_SCREENED_CHARS,
  REVIEW_SCORE,
  ROT13_CHARS,
  ROT13_HINT,
  TRACKING_REDIRECTORS,
  type ReasonCode,
} from './rules.ts';

export interface ScreeningReason {
  code: ReasonCode;
  detail: string;
}
export interface Screening {
  verdict: 'clear' | 'review';
  score: number;
  reasons: ScreeningReason[];
}

/** What the screener reads of a message (a mailparser ParsedMail fits). */
export interface ScreenInput {
  subject?: string;
  text?: string;
  html?: string | false;
  from?: { value: Array<{ address?: string; name?: string }> };
  attachments?: Array<{ filename?: string; contentType?: string; content?: Uint8Array }>;
}

/** Who the message is for and how it arrived. */
export interface ScreenContext {
  /** The receiving accounts' domains and the inboxes' address domains, lowercase. */
  ownDomains: string[];
  /** The receiving inboxes' addresses, lowercase. */
  ownAddresses: string[];
  /** SPF/DKIM/DMARC results; null for a local delivery (authenticated by construction). */
  authentication: { dmarc?: string; dmarcPolicy?: string; fromDomain?: string } | null;
}

/** One weighted finding. */
interface Finding extends ScreeningReason {
  weight: number;
}

const cut = (s: string) => {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > DETAIL_CHARS ? `${t.slice(0, DETAIL_CHARS - 1)}\u2026` : t;
};

/** Letters that look like Latin ones, folded to them (a UTS #39 skeleton, the part that matters here). */
export function skeleton(s: string): string {
  let out = '';
  for (const ch of s.normalize('NFKC').toLowerCase()) out += CONFUSABLES[ch] ?? ch;
  return out;
}

const ASCII = /^[\x00-\x7f]*$/;

/** The characters `\s` matches in a regular expression, by char code. */
const isSpace = (c: number): boolean =>
  c === 32 ||
  (c >= 9 && c <= 13) ||
  (c > 127 && (c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff));

/**
 * Text as the rules read it: NFKC, lowercase, invisible characters removed, each run of
 * whitespace one space, or one line break when it holds one. One loop over char codes that
 * copies the text between the runs it changes (a single space stays): two regular-expression
 * replacements touched every space, and cost twice as much (bench/screening.ts).
 */
export function normalise(s: string): string {
  // NFKC leaves ASCII as it is, and no invisible character is ASCII (most mail: both skipped).
  const t = (ASCII.test(s) ? s : s.normalize('NFKC').replace(INVISIBLE_CHARS, '')).toLowerCase();
  let out = '';
  let from = 0;
  for (let i = 0; i < t.length;) {
    const c = t.charCodeAt(i);
    if (!isSpace(c)) {
      i++;
      continue;
    }
    const start = i;
    let lineBreak = false;
    for (; i < t.length && isSpace(t.charCodeAt(i)); i++) if (t.charCodeAt(i) === 10) lineBreak = true;
    if (!lineBreak && c === 32 && i - start === 1) continue;
    out += t.slice(from, start) + (lineBreak ? '\n' : ' ');
    from = i;
  }
  return from === 0 ? t : out + t.slice(from);
}

/** rot13 of lowercase text (the rules read lowercase): a loop over char codes, several times faster than a replace callback per letter. */
function rot13(s: string): string {
  const codes = new Uint16Array(s.length);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    codes[i] = c >= 97 && c <= 122 ? ((c - 84) % 26) + 97 : c;
  }
  return new TextDecoder('utf-16le').decode(codes);
}

/** Where a piece of text came from; hidden places are never a discussion of an attack, and are obfuscation themselves. */
interface Source {
  where: string;
  text: string;
  /** Text no person reads (hidden HTML, comments, encoded blocks, attachments the agent may be handed). */
  concealed: boolean;
}

/** Whether a match is inside quotation marks: opened just before it and closed later on its line. */
function quoted(text: string, from: number, to: number): boolean {
  const before = text.slice(Math.max(0, from - 2), from);
  const rest = text.slice(to, to + 200);
  const line = rest.slice(0, rest.includes('\n') ? rest.indexOf('\n') : rest.length);
  return /["\u201c\u201e\u00ab'\u2018]/.test(before) && /["\u201d\u201c\u00bb'\u2019]/.test(line);
}

/** The top-level alternatives of a pattern's source (`a|b(c|d)` → `a`, `b(c|d)`). */
export function alternativesOf(source: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let inClass = false;
  let from = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') i++;
    else if (inClass) inClass = c !== ']';
    else if (c === '[') inClass = true;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === '|' && depth === 0) {
      out.push(source.slice(from, i));
      from = i + 1;
    }
  }
  out.push(source.slice(from));
  return out;
}

/**
 * The rules as two patterns that match a text exactly when some rule does: most text matches
 * none, and is then not read rule by rule. The alternatives that start at a word boundary share
 * one `\b` (so the engine tries them only where a word starts), the others are a second
 * pattern; together a third of the rules' passes one by one (bench/screening.ts).
 */
function union(rules: typeof INJECTION_RULES): RegExp[] {
  const alternatives = rules.flatMap((r) => alternativesOf(r.pattern.source));
  const atWord = alternatives.filter((a) => a.startsWith('\\b')).map((a) => `(?:${a.slice(2)})`);
  const others = alternatives.filter((a) => !a.startsWith('\\b')).map((a) => `(?:${a})`);
  // Every rule's flags but the stateful ones (`test` with g or y would move lastIndex); `m` on all only widens the union.
  const flags = [...new Set(rules.flatMap((r) => [...r.pattern.flags]))].filter((f) => f !== 'g' && f !== 'y').join('');
  return [atWord.length ? new RegExp(`\\b(?:${atWord.join('|')})`, flags) : undefined, others.length ? new RegExp(others.join('|'), flags) : undefined].filter((p) => p !== undefined);
}
const ANY_RULE = union(INJECTION_RULES);
const ANY_LATIN_RULE = union(INJECTION_RULES.filter((r) => r.latin));

/** Whether some injection rule (some `latin` one) matches `text`: one or two passes instead of one per rule. */
export const anyRuleMatches = (text: string, latinOnly = false): boolean => (latinOnly ? ANY_LATIN_RULE : ANY_RULE).some((p) => p.test(text));

function findInjections(sources: Source[]): Finding[] {
  const found = new Map<string, Finding>();
  const add = (rule: string, weight: number, detail: string) => {
    const had = found.get(rule);
    if (!had || had.weight < weight) found.set(rule, { code: 'prompt_injection', weight, detail });
  };
  for (const src of sources) {
    const plain = normalise(src.text);
    const hadInvisible = INVISIBLE_CHARS.test(src.text);
    INVISIBLE_CHARS.lastIndex = 0;
    // ASCII text has no homoglyph to fold (the common case: skipped).
    const folded = /[^\x00-\x7f]/.test(plain) ? skeleton(plain) : plain;
    const variants: Array<{ text: string; how?: string; latinOnly?: boolean }> = [{ text: plain }];
    if (folded !== plain) variants.push({ text: folded, how: 'homoglyphs', latinOnly: true });
    // A rot13 block is a sentence or a paragraph: the head of each source is enough, and only
    // when it holds the rot13 form of a word English injections need (ROT13_HINT).
    const head = plain.slice(0, ROT13_CHARS);
    if (ROT13_HINT.test(head)) variants.push({ text: rot13(head), how: 'rot13', latinOnly: true });
    for (const v of variants) {
      if (!anyRuleMatches(v.text, v.latinOnly)) continue;
      for (const rule of INJECTION_RULES) {
        if (v.latinOnly && !rule.latin) continue;
        const m = rule.pattern.exec(v.text);
        if (!m) continue;
        let weight = rule.weight;
        const obfuscated = src.concealed || v.how !== undefined || (hadInvisible && !rule.pattern.test(src.text.toLowerCase()));
        // A phrase quoted in visible text is usually a discussion of it (a security newsletter).
        if (!obfuscated && quoted(v.text, m.index, m.index + m[0].length)) weight = Math.round(weight / 2);
        if (obfuscated) weight += 20;
        const how = [src.where, v.how, hadInvisible && !v.how ? 'zero-width characters' : undefined].filter(Boolean).join(', ');
        add(rule.id, weight, cut(`${how ? `${how}: ` : ''}\u201c${m[0]}\u201d`));
      }
    }
  }
  // Two rules matching the same words are one reason (the heavier).
  const seen = new Set<string>();
  return [...found.values()].sort((a, b) => b.weight - a.weight).filter((f) => !seen.has(f.detail) && seen.add(f.detail));
}

/** Characters of base64 (and its padding), by char code. */
const BASE64_CHAR = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=') BASE64_CHAR[c.charCodeAt(0)] = 1;

/** Shortest run of base64 characters that can hold a block (BASE64_BLOCK: six groups of four). */
const BASE64_RUN = 24;
const isBase64 = (text: string, i: number): boolean => {
  const c = text.charCodeAt(i);
  return c < 128 && BASE64_CHAR[c] === 1;
};

/**
 * The runs of base64 characters long enough to hold a block; BASE64_BLOCK then reads each run.
 * A run of BASE64_RUN characters starting at `floor` or later covers position floor + 23: the
 * loop looks there first, and a character that is no base64 rules out every run through it, so
 * it jumps a whole run length on. Ordinary text, whose words are short, is read at about one
 * character in five: seven times faster than a loop over every character, itself three times
 * faster than a regular expression trying a match at every letter (bench/screening.ts).
 */
export function base64Runs(text: string): string[] {
  const runs: string[] = [];
  let floor = 0;
  let i = BASE64_RUN - 1;
  while (i < text.length) {
    if (!isBase64(text, i)) {
      floor = i + 1;
      i += BASE64_RUN;
      continue;
    }
    // Where the run through i starts: too short, and the next look is where a run from there would end.
    let start = i;
    while (start > floor && isBase64(text, start - 1)) start--;
    if (i - start + 1 < BASE64_RUN) {
      i = start + BASE64_RUN - 1;
      continue;
    }
    let end = i + 1;
    while (end < text.length && isBase64(text, end)) end++;
    runs.push(text.slice(start, end));
    floor = end + 1;
    i = end + BASE64_RUN;
  }
  return runs;
}

/**
 * The BASE64_BLOCK matches of a run. A run without `=` is one: its start follows a character
 * that is no base64, and whole groups of four up to its end are the match (without padding
 * there is none of a last group of two or three). Only a run with padding in it needs the
 * regular expression, which tried a match at every character of every run.
 */
export const blocksOf = (run: string): string[] => (run.includes('=') ? [...run.matchAll(BASE64_BLOCK)].map((m) => m[0]) : [run.slice(0, run.length - (run.length % 4))]);

/** Base64 blocks that decode to readable text. */
function decodedBlocks(text: string): string[] {
  const out: string[] = [];
  for (const run of base64Runs(text)) {
    for (const block of blocksOf(run)) {
      if (out.length >= MAX_DECODED_BLOCKS) return out;
      const bytes = Buffer.from(block, 'base64');
      // Readable: valid UTF-8 without replacement characters (checked first, on the bytes: it
      // rules out most binary at once, without making a string of it), and mostly letters and
      // spaces.
      if (!isUtf8(bytes)) continue;
      const decoded = bytes.toString('utf8');
      if (decoded.includes('\uFFFD')) continue;
      const letters = decoded.match(/[\p{L}\s]/gu)?.length ?? 0;
      if (letters / decoded.length > 0.8) out.push(decoded);
    }
  }
  return out;
}

const registrable = (host: string): string => getDomain(host, { allowPrivateDomains: true }) ?? host;

/** A domain in link text ("paypal.com", "https://paypal.com/login"), or undefined. */
function domainInText(text: string): string | undefined {
  const m = /(?:https?:\/\/)?((?:[a-z0-9\u00a1-\uffff](?:[a-z0-9\u00a1-\uffff-]{0,61}[a-z0-9\u00a1-\uffff])?\.)+[a-z\u00a1-\uffff]{2,63})(?=$|[\s/:?#)\]>,;!])/i.exec(text.trim());
  if (!m) return undefined;
  const info = parseHost(m[1].toLowerCase());
  return info.isIcann || info.isPrivate ? (info.hostname ?? undefined) : undefined;
}

/** Shapes worked out lately: the same few hosts and own domains come back in message after message. */
const shapes = new Map<string, string>();
const SHAPES_KEPT = 1000;

/** The shape a lookalike shares with the domain it copies: skeleton and common swaps. */
function shape(domain: string): string {
  let s = shapes.get(domain);
  if (s !== undefined) return s;
  s = skeleton(domainToUnicode(domain) || domain);
  for (const [re, to] of DOMAIN_SWAPS) s = s.replace(re, to);
  s = s.replace(/-/g, '');
  if (shapes.size >= SHAPES_KEPT) shapes.clear();
  shapes.set(domain, s);
  return s;
}

/** Edit distance of at most one (insert, delete, replace, swap of neighbours). */
function withinOne(a: string, b: string): boolean {
  if (a === b) return true;
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  if (a.length === b.length) return a.slice(i + 1) === b.slice(i + 1) || (a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2));
  return a.length > b.length ? a.slice(i + 1) === b.slice(i) : a.slice(i) === b.slice(i + 1);
}

/** The own registrable domain `domain` imitates without being it, if any. */
function imitated(domain: string, own: string[]): string | undefined {
  const reg = registrable(domain);
  if (own.includes(reg)) return undefined;
  const label = reg.split('.')[0];
  for (const o of own) {
    const ol = o.split('.')[0];
    if (shape(reg) === shape(o)) return o;
    // One letter off a name long enough not to collide by chance, on any suffix.
    if (ol.length >= 5 && withinOne(label, ol)) return o;
    if (ol.length >= 5 && label !== ol && shape(label) === shape(ol)) return o;
  }
  return undefined;
}

/** A punycode host whose Unicode form reads as a Latin name (mixed or confusable scripts). */
function punycodeLookalike(host: string): string | undefined {
  if (!host.split('.').some((l) => l.startsWith('xn--'))) return undefined;
  const unicode = domainToUnicode(host);
  if (!unicode || unicode === host) return undefined;
  const letters = unicode.replace(/[.\-0-9]/g, '');
  const latin = /[a-z]/.test(letters);
  const confusable = [...letters].some((c) => CONFUSABLES[c] !== undefined);
  return confusable && (latin || /^[a-z.\-0-9]+$/.test(skeleton(unicode))) ? unicode : undefined;
}

function hostOf(href: string): string | undefined {
  try {
    const u = new URL(href.trim());
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.hostname.toLowerCase().replace(/\.$/, '') : undefined;
  } catch {
    return undefined;
  }
}

function linkFindings(links: Array<{ href: string; text: string }>, own: string[]): Finding[] {
  const out: Finding[] = [];
  const seen = new Set<string>();
  const push = (f: Finding) => {
    if (seen.has(f.detail)) return;
    seen.add(f.detail);
    out.push(f);
  };
  // A newsletter's hundreds of links go to a few hosts: each host is judged once.
  const hosts = new Map<string, { reg: string; tracker: boolean }>();
  for (const link of links.slice(0, MAX_LINKS)) {
    const host = hostOf(link.href);
    if (!host) continue;
    let h = hosts.get(host);
    if (!h) {
      h = { reg: registrable(host), tracker: false };
      h.tracker = TRACKING_REDIRECTORS.has(h.reg);
      hosts.set(host, h);
      const uni = punycodeLookalike(host);
      if (uni) push({ code: 'deceptive_link', weight: LINK_WEIGHT.punycode, detail: cut(`punycode lookalike ${host} (${uni})`) });
      const copied = imitated(host, own);
      if (copied) push({ code: 'lookalike_domain', weight: LINK_WEIGHT.lookalike, detail: cut(`link to ${host}, a lookalike of ${copied}`) });
    }
    const shown = /\.[a-z\u00a1-\uffff]{2}/i.test(link.text) ? domainInText(link.text) : undefined;
    if (shown && !h.tracker && registrable(shown) !== h.reg) {
      push({ code: 'deceptive_link', weight: LINK_WEIGHT.mismatch, detail: cut(`link text shows ${shown} but leads to ${host}`) });
    }
  }
  return out;
}

/** Names in a ZIP's central directory (bounded), or [] when it is none. */
export function zipNames(buf: Uint8Array, max = 1000): string[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length < 22 || b.readUInt32LE(0) !== 0x04034b50) return [];
  const floor = Math.max(0, b.length - 65_557);
  let eocd = -1;
  for (let i = b.length - 22; i >= floor; i--) {
    if (b.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd === -1) return [];
  const count = Math.min(b.readUInt16LE(eocd + 10), max);
  let at = b.readUInt32LE(eocd + 16);
  const names: string[] = [];
  for (let n = 0; n < count && at + 46 <= b.length && b.readUInt32LE(at) === 0x02014b50; n++) {
    const nameLen = b.readUInt16LE(at + 28);
    const extra = b.readUInt16LE(at + 30);
    const comment = b.readUInt16LE(at + 32);
    names.push(b.toString('utf8', at + 46, Math.min(b.length, at + 46 + nameLen)));
    at += 46 + nameLen + extra + comment;
  }
  return names;
}

const extensionOf = (name: string) => (/\.([a-z0-9]{1,12})\s*$/i.exec(name.trim())?.[1] ?? '').toLowerCase();
const OLE_MACROS = Buffer.from('_VBA_PROJECT', 'utf16le');

function attachmentFindings(atts: NonNullable<ScreenInput['attachments']>): Finding[] {
  const out: Finding[] = [];
  for (const a of atts) {
    const name = (a.filename ?? '').slice(0, 255);
    const ext = extensionOf(name);
    if (DANGEROUS_EXTENSIONS.has(ext)) {
      out.push({ code: 'dangerous_attachment', weight: ATTACHMENT_WEIGHT, detail: cut(`${name}: .${ext} files run code when opened`) });
      continue;
    }
    if (a.contentType && DANGEROUS_TYPES.test(a.contentType)) {
      out.push({ code: 'dangerous_attachment', weight: ATTACHMENT_WEIGHT, detail: cut(`${name || 'attachment'}: ${a.contentType}`) });
      continue;
    }
    const content = a.content;
    if (!content || !content.length) continue;
    const names = ARCHIVE_EXTENSIONS.has(ext) || ext === '' || ext === 'zip' ? zipNames(content) : [];
    const inside = names.find((n) => DANGEROUS_EXTENSIONS.has(extensionOf(n)) || /(?:^|\/)vbaproject\.bin$/i.test(n));
    if (inside) {
      out.push({ code: 'dangerous_attachment', weight: ATTACHMENT_WEIGHT, detail: cut(/vbaproject\.bin$/i.test(inside) ? `${name}: holds Office macros (${inside})` : `${name} holds ${inside}`) });
      continue;
    }
    if (['doc', 'xls', 'ppt', 'dot', 'xlt'].includes(ext) && Buffer.from(content.buffer, content.byteOffset, content.byteLength).includes(OLE_MACROS)) {
      out.push({ code: 'dangerous_attachment', weight: ATTACHMENT_WEIGHT, detail: cut(`${name}: holds Office macros`) });
    }
  }
  return out;
}

function senderFindings(from: ScreenInput['from'], ctx: ScreenContext): Finding[] {
  const out: Finding[] = [];
  const first = from?.value.find((v) => v.address);
  const address = (first?.address ?? '').toLowerCase();
  const name = first?.name ?? '';
  const domain = address.includes('@') ? address.slice(address.lastIndexOf('@') + 1).replace(/\.$/, '') : '';
  const auth = ctx.authentication;
  const own = ctx.ownDomains;
  const ownReg = [...new Set(own.map(registrable))];
  const claimsOwn = domain !== '' && own.some((d) => domain === d || domain.endsWith(`.${d}`));
  // A local delivery (auth null) was written by this appliance: proven by construction.
  const proven = auth === null || (auth.fromDomain !== undefined && (auth.fromDomain === domain || domain.endsWith(`.${auth.fromDomain}`) || auth.fromDomain.endsWith(`.${domain}`)));
  if (claimsOwn && !proven) {
    out.push({
      code: 'impersonation',
      weight: IMPERSONATION_WEIGHT.from,
      detail: cut(`From ${address} claims ${domain}, a domain of this account, without an authenticated sender (DMARC ${auth?.dmarc ?? 'none'})`),
    });
  } else if (!claimsOwn && name) {
    const lower = skeleton(name);
    const named = ctx.ownAddresses.find((a) => lower.includes(a)) ?? own.find((d) => new RegExp(`(?:^|[^a-z0-9.-])${d.replace(/[.]/g, '\\.')}(?:$|[^a-z0-9-])`).test(lower));
    if (named)
      out.push({
        code: 'impersonation',
        weight: IMPERSONATION_WEIGHT.displayName,
        detail: cut(`display name \u201c${name}\u201d names ${named} but the mail is from ${address || 'an unknown address'}`),
      });
  }
  if (domain && !claimsOwn) {
    const copied = imitated(domain, ownReg);
    if (copied) out.push({ code: 'lookalike_domain', weight: LINK_WEIGHT.lookalike, detail: cut(`From ${address}: ${domain} is a lookalike of ${copied}`) });
  }
  if (auth && auth.dmarc === 'fail' && auth.dmarcPolicy && ENFORCED_DMARC.has(auth.dmarcPolicy.toLowerCase())) {
    out.push({ code: 'auth_failed', weight: AUTH_FAILED_WEIGHT, detail: cut(`DMARC fail for ${domain || 'the From domain'} under p=${auth.dmarcPolicy.toLowerCase()}`) });
  }
  return out;
}

const TEXT_ATTACHMENT = /^(?:text\/|application\/(?:json|xml|x-yaml|yaml))/i;
/** What follows `[//]:` in a markdown comment, up to its opening parenthesis. */
const MARKDOWN_COMMENT = /\s*#\s*\(/y;

/**
 * The comments of a markdown text, `[//]: # (…)` and `<!-- … -->`, left to right as the pattern
 * `\[\/\/\]:\s*#\s*\(([^)]*)\)|<!--([\s\S]*?)-->` finds them, in one pass: that pattern
 * tried every `<!--` to the end of the text when none closed (256 KB of `<!--`: 2.9 s).
 */
export function markdownComments(text: string): string[] {
  const out: string[] = [];
  let at = 0;
  let html = text.indexOf('<!--');
  let md = text.indexOf('[//]:');
  while (html !== -1 || md !== -1) {
    if (md === -1 || (html !== -1 && html < md)) {
      const end = text.indexOf('-->', html + 4);
      // None closes this one: none after it closes either.
      if (end === -1) html = -1;
      else {
        out.push(text.slice(html + 4, end));
        at = end + 3;
      }
    } else {
      MARKDOWN_COMMENT.lastIndex = md + 5;
      const head = MARKDOWN_COMMENT.test(text);
      const end = head ? text.indexOf(')', MARKDOWN_COMMENT.lastIndex) : -1;
      if (!head) md = text.indexOf('[//]:', md + 1);
      else if (end === -1) md = -1;
      else {
        out.push(text.slice(MARKDOWN_COMMENT.lastIndex, end));
        at = end + 1;
      }
    }
    if (html !== -1 && html < at) html = text.indexOf('<!--', at);
    if (md !== -1 && md < at) md = text.indexOf('[//]:', at);
  }
  return out;
}

const TEXT_EXT = new Set(['txt', 'md', 'markdown', 'csv', 'html', 'htm', 'json', 'xml', 'yaml', 'yml', 'log', 'ics', 'eml']);

/** Score and verdict of a list of findings (the classifier's, added later, follows the same sum). */
export function verdictOf(findings: Array<{ weight: number }>): { verdict: Screening['verdict']; score: number } {
  const score = Math.min(
    100,
    findings.reduce((s, f) => s + f.weight, 0),
  );
  return { verdict: score >= REVIEW_SCORE ? 'review' : 'clear', score };
}

/** Whom a message is screened for: the receiving inboxes' addresses and their accounts' domains. */
export type ScreenFor = Omit<ScreenContext, 'authentication'>;

/**
 * The screening of a parsed message for `screen` (null when not asked for): on an analysis
 * worker, or where the message was parsed when no worker runs (smtp.analysis_workers = 0, a
 * large message parsed from its file).
 */
export function screenParsed(parsed: ScreenInput, authentication: ScreenContext['authentication'], screen: ScreenFor | undefined): Screening | null {
  if (!screen) return null;
  return screenMessage(parsed, { ...screen, authentication });
}

/**
 * Characters of an attachment's extracted text screened when it is handed out (GET
 * /attachments/{id}/text, MCP get_attachment): on the main thread, once per file (the text cache
 * keeps the verdict), so bounded to what a few milliseconds read.
 */
export const ATTACHMENT_SCREEN_CHARS = 65_536;

/** The screening of an attachment's text: the content rules (prompt injection, encoded blocks); the sender's are the message's. */
export function screenAttachmentText(text: string): Screening {
  return screenMessage({ text: text.slice(0, ATTACHMENT_SCREEN_CHARS) }, { ownDomains: [], ownAddresses: [], authentication: null });
}

/** Screens one parsed message. */
export function screenMessage(mail: ScreenInput, ctx: ScreenContext): Screening {
  const findings: Finding[] = [];
  const own = [...new Set(ctx.ownDomains.map((d) => d.toLowerCase()))];
  const sources: Source[] = [];
  let budget = MAX_SCREENED_CHARS;
  /** Reads what of `text` the budget leaves, and returns that part. */
  const take = (where: string, text: string | undefined, concealed: boolean): string => {
    if (!text || budget <= 0) return '';
    const t = text.slice(0, budget);
    budget -= t.length;
    sources.push({ where, text: t, concealed });
    for (const block of decodedBlocks(t)) sources.push({ where: `base64 in ${where || 'the body'}`, text: block, concealed: true });
    return t;
  };
  take('subject', mail.subject, false);
  let links: Array<{ href: string; text: string }> = [];
  if (typeof mail.html === 'string' && mail.html) {
    const html = readHtml(mail.html.slice(0, MAX_SCREENED_CHARS));
    take('', html.visibleText, false);
    for (const h of html.hidden) take('hidden text', h, true);
    for (const c of html.comments) take('HTML comment', c, true);
    links = html.links;
    const hiddenChars = html.hidden.reduce((n, h) => n + h.length, 0);
    if (hiddenChars > 0) {
      const strong = hiddenChars >= HIDDEN_TEXT_REVIEW_CHARS;
      findings.push({
        code: 'hidden_text',
        weight: strong ? HIDDEN_WEIGHT.strong : HIDDEN_WEIGHT.weak,
        detail: cut(`${hiddenChars} characters a mail client does not show: \u201c${html.hidden.join(' \u2026 ')}\u201d`),
      });
    }
  }
  // The text part (when the HTML was read, the text part is usually the same words; it is read
  // too, since a sender may put something else there). Links and comments are looked for in the
  // part the budget left (as the rest is not read at all).
  if (mail.text) {
    const text = take('', mail.text, false);
    for (const m of text.matchAll(/\[([^\]]{1,200})\]\((https?:\/\/[^)\s]{1,2000})\)/g)) links.push({ href: m[2], text: m[1] });
    for (const c of markdownComments(text)) take('markdown comment', c, true);
  }
  for (const a of mail.attachments ?? []) {
    const name = a.filename ?? 'attachment';
    if (!a.content || !(TEXT_ATTACHMENT.test(a.contentType ?? '') || TEXT_EXT.has(extensionOf(name)))) continue;
    let text = Buffer.from(a.content.buffer, a.content.byteOffset, Math.min(a.content.byteLength, budget)).toString('utf8');
    if (/html?$/.test(extensionOf(name)) || /html/i.test(a.contentType ?? '')) text = readHtml(text).visibleText;
    take(`attachment ${name}`, text, true);
  }
  findings.push(...findInjections(sources).slice(0, 5));
  findings.push(...linkFindings(links, own).slice(0, 5));
  findings.push(...senderFindings(mail.from, { ...ctx, ownDomains: own }));
  findings.push(...attachmentFindings(mail.attachments ?? []).slice(0, 5));
  // Several reasons of one code count once at full weight, the rest a third: ten mismatched
  // links are not ten times one.
  const counted = new Map<string, number>();
  const weighed = findings.map((f) => {
    const n = counted.get(f.code) ?? 0;
    counted.set(f.code, n + 1);
    return { weight: n === 0 ? f.weight : Math.round(f.weight / 3) };
  });
  return { ...verdictOf(weighed), reasons: findings.map(({ code, detail }) => ({ code, detail })) };
}
