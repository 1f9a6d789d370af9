// What of an HTML body a mail client shows: elements hidden by CSS (display:none,
// visibility:hidden, opacity 0, a font too small to read, text the colour of its background,
// placed off the page, a zero-size clipping box) and by the `hidden` attribute are found with
// htmlparser2 (the parser the project already uses for mail HTML), and removed from the source by
// their offsets, so the rest of the HTML is kept byte for byte. The screener reads the hidden
// text (src/domain/screening/screen.ts); extractedText/extractedHtml and MCP answers carry only
// the visible part (src/domain/mail/messages.ts). Inline styles and simple <style> rules (tag,
// .class, #id, tag.class) are read; anything richer is not, and what it hides is taken as shown.
// Linear in the HTML: rules are looked up by an element's tag, classes and id, a text node is
// added to the one hidden element and the links open, and nesting past MAX_DEPTH ends the reading
// of what is shown (the rest is hidden text).
import { Parser } from 'htmlparser2';
import { HIDDEN_STYLE } from './rules.ts';

export interface HtmlReading {
  /** The HTML without its hidden elements. */
  visibleHtml: string;
  /** The text of each hidden element, whitespace collapsed. */
  hidden: string[];
  /** Visible text (whitespace as in the source: collapse it before showing it). */
  visibleText: string;
  /** HTML comments (`<!-- … -->`), which no client shows and an agent reading the source does. */
  comments: string[];
  /** Links: href and the text shown for them. */
  links: Array<{ href: string; text: string }>;
}

type Rgb = [number, number, number];
const NAMED: Record<string, Rgb> = {
  white: [255, 255, 255],
  black: [0, 0, 0],
  red: [255, 0, 0],
  green: [0, 128, 0],
  blue: [0, 0, 255],
  yellow: [255, 255, 0],
  gray: [128, 128, 128],
  grey: [128, 128, 128],
  silver: [192, 192, 192],
  whitesmoke: [245, 245, 245],
  snow: [255, 250, 250],
  ivory: [255, 255, 240],
  ghostwhite: [248, 248, 255],
  floralwhite: [255, 250, 240],
  navy: [0, 0, 128],
  orange: [255, 165, 0],
};

function colour(value: string | undefined): Rgb | 'transparent' | undefined {
  if (!value) return undefined;
  let v = value.trim().toLowerCase();
  // Not a `\s*!important$` pattern: tried from every space, it read a long run of them again each time.
  if (v.endsWith('!important')) v = v.slice(0, -'!important'.length).trimEnd();
  if (v === 'transparent') return 'transparent';
  if (NAMED[v]) return NAMED[v];
  let m = /^#([0-9a-f]{3})$/.exec(v);
  if (m) return [...m[1]].map((c) => parseInt(c + c, 16)) as Rgb;
  m = /^#([0-9a-f]{6})(?:[0-9a-f]{2})?$/.exec(v);
  if (m) return [0, 2, 4].map((i) => parseInt(m![1].slice(i, i + 2), 16)) as Rgb;
  m = /^rgba?\(\s*(\d+)[\s,]+(\d+)[\s,]+(\d+)(?:[\s,/]+([\d.]+%?))?\s*\)$/.exec(v);
  if (m) {
    if (m[4] !== undefined && parseFloat(m[4]) === 0) return 'transparent';
    return [Number(m[1]), Number(m[2]), Number(m[3])];
  }
  return undefined;
}

/** A CSS length in px (px, pt, em/rem at 16px, %, bare 0); undefined when not a length. */
function px(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const m = /^(-?[\d.]+)(px|pt|em|rem|%|vw|vh)?\b/.exec(value.trim().toLowerCase());
  if (!m) return undefined;
  const n = parseFloat(m[1]);
  switch (m[2]) {
    case 'pt':
      return (n * 4) / 3;
    case 'em':
    case 'rem':
      return n * 16;
    case '%':
      return (n * 16) / 100;
    default:
      return n;
  }
}

function declarations(style: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of style.split(';')) {
    const i = part.indexOf(':');
    if (i === -1) continue;
    out.set(
      part.slice(0, i).trim().toLowerCase(),
      part
        .slice(i + 1)
        .trim()
        .toLowerCase(),
    );
  }
  return out;
}

/** Why a set of declarations hides its element, if it does (its colour is judged with the background, below). */
function hiddenBy(d: Map<string, string>): string | undefined {
  const display = d.get('display');
  if (display?.startsWith('none')) return 'display:none';
  const visibility = d.get('visibility');
  if (visibility?.startsWith('hidden') || visibility?.startsWith('collapse')) return 'visibility:hidden';
  const opacity = d.get('opacity');
  if (opacity !== undefined && parseFloat(opacity) <= 0.05) return 'opacity:0';
  const size = px(d.get('font-size'));
  if (size !== undefined && size <= HIDDEN_STYLE.maxFontPx) return `font-size:${d.get('font-size')}`;
  for (const prop of ['left', 'top', 'margin-left', 'margin-top', 'text-indent', 'right']) {
    const v = px(d.get(prop));
    if (v !== undefined && v <= -HIDDEN_STYLE.offscreenPx) return `${prop}:${d.get(prop)} (off-screen)`;
  }
  const overflow = d.get('overflow');
  if (overflow?.startsWith('hidden')) {
    for (const prop of ['max-height', 'height', 'max-width', 'width']) {
      const v = px(d.get(prop));
      if (v !== undefined && v <= 1) return `${prop}:0 with overflow:hidden`;
    }
  }
  const clip = d.get('clip') ?? d.get('clip-path');
  if (clip && /rect\(\s*0(?:px)?[\s,]+0(?:px)?[\s,]+0(?:px)?[\s,]+0(?:px)?\s*\)|inset\(\s*50%|circle\(\s*0/.test(clip)) return 'clip';
  const transform = d.get('transform');
  if (transform && /scale\(\s*0(?:\.0\d*)?\s*[,)]/.test(transform)) return 'transform:scale(0)';
  return undefined;
}

/**
 * Elements nested deeper than this end the reading of what is shown: from the element that goes
 * past it to the end, the HTML is taken as hidden (cut from the visible HTML, its text read as
 * hidden text), as its styles are no longer followed. Mail is nested a few dozen deep; nesting
 * 100,000 elements is an attack on the readers, whose work grows with the depth (htmlparser2
 * keeps its open elements with unshift and indexOf; html-to-text recurses once per level).
 */
export const MAX_DEPTH = 256;

const NO_TEXT = new Set(['script', 'style', 'head', 'title', 'template', 'noscript']);
const BLOCK = new Set(['p', 'div', 'br', 'tr', 'li', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'table', 'td', 'blockquote', 'section', 'article', 'header', 'footer']);

interface Frame {
  name: string;
  /** Hidden, by itself or an ancestor. */
  hidden: boolean;
  colour?: Rgb;
  background?: Rgb;
  /** Offset of its opening tag, when it is the outermost hidden element. */
  hiddenFrom?: number;
  hiddenWhy?: string;
  text: string[];
  link?: { href: string; text: string[] };
}

/** The only properties read off an element's declarations (hiddenBy, the colours): a rule keeps no others. */
const READ_PROPS = new Set([
  'display',
  'visibility',
  'opacity',
  'font-size',
  'left',
  'top',
  'margin-left',
  'margin-top',
  'text-indent',
  'right',
  'overflow',
  'max-height',
  'height',
  'max-width',
  'width',
  'clip',
  'clip-path',
  'transform',
  'color',
  'background-color',
  'background',
  'background-image',
]);

/**
 * Simple <style> rules, by selector ('p', '.c', '#i', 'p.c', 'p#i'): for each property, its value
 * and the rule's place in the document, so the last rule setting a property wins as in the
 * sheet's order. Looked up by an element's tag, classes and id: the cost of an element is its own
 * classes, never the number of rules.
 */
type Sheet = Map<string, Map<string, { value: string; order: number }>>;

/** `css` without its comments (an unclosed one runs to the end), in one pass. */
function withoutComments(css: string): string {
  const parts: string[] = [];
  let at = 0;
  for (let open = css.indexOf('/*'); open !== -1; open = css.indexOf('/*', at)) {
    parts.push(css.slice(at, open));
    const close = css.indexOf('*/', open + 2);
    if (close === -1) return parts.join('');
    at = close + 2;
  }
  parts.push(css.slice(at));
  return parts.join('');
}

/**
 * Reads the top-level rules of a <style> into `sheet` (rules inside @media and other blocks are
 * not read). One pass from brace to brace with indexOf: a rule is a `{` with a selector before it
 * and a `}` as the next brace.
 */
function readStyleSheet(css: string, sheet: Sheet, order: { n: number }): void {
  const text = withoutComments(css);
  let depth = 0;
  let after = 0; // just past the previous brace
  for (let i = text.search(/[{}]/); i !== -1;) {
    if (text[i] === '}') {
      depth = Math.max(0, depth - 1);
      after = i + 1;
      i = nextBrace(text, after);
      continue;
    }
    const next = nextBrace(text, i + 1);
    if (depth > 0 || next === -1 || text[next] === '{') {
      depth++;
      after = i + 1;
      i = next;
      continue;
    }
    readRule(text.slice(after, i), text.slice(i + 1, next), sheet, order);
    after = next + 1;
    i = nextBrace(text, after);
  }
}

function nextBrace(text: string, from: number): number {
  const open = text.indexOf('{', from);
  const close = text.indexOf('}', from);
  return open === -1 ? close : close === -1 ? open : Math.min(open, close);
}

function readRule(selectors: string, body: string, sheet: Sheet, order: { n: number }): void {
  const decls = declarations(body);
  if (!hiddenBy(decls) && !decls.has('color') && !decls.has('background-color') && !decls.has('background')) return;
  const n = order.n++;
  for (const raw of selectors.split(',')) {
    const sel = /^([a-z][a-z0-9]*)?(?:\.([\w-]+)|#([\w-]+))?$/i.exec(raw.trim());
    if (!sel || (!sel[1] && !sel[2] && !sel[3])) continue;
    const key = (sel[1]?.toLowerCase() ?? '') + (sel[2] !== undefined ? `.${sel[2]}` : sel[3] !== undefined ? `#${sel[3]}` : '');
    let props = sheet.get(key);
    if (!props) sheet.set(key, (props = new Map()));
    for (const [k, v] of decls) if (READ_PROPS.has(k)) props.set(k, { value: v, order: n });
  }
}

/** The declarations the rules of `sheet` give an element, the last rule's value of each property. */
function ruleDeclarations(sheet: Sheet, name: string, classes: Set<string>, id: string | undefined): Map<string, string> {
  const keys = [name];
  for (const c of classes) keys.push(`.${c}`, `${name}.${c}`);
  if (id !== undefined) keys.push(`#${id}`, `${name}#${id}`);
  const best = new Map<string, { value: string; order: number }>();
  for (const key of keys) {
    for (const [k, d] of sheet.get(key) ?? []) {
      const had = best.get(k);
      if (!had || had.order < d.order) best.set(k, d);
    }
  }
  return new Map([...best].map(([k, d]) => [k, d.value]));
}

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

/**
 * The text, comments and links of HTML none of which is shown (what follows an element nested
 * past MAX_DEPTH). Read MAX_DEPTH levels at a time: at an element deeper than that, the parser
 * stops and a new one starts from it, so no parser's stack grows past MAX_DEPTH.
 */
function readUnshown(html: string): { text: string; comments: string[]; links: Array<{ href: string; text: string }> } {
  const text: string[] = [];
  const comments: string[] = [];
  const links: Array<{ href: string; text: string }> = [];
  for (let at = 0; at < html.length;) {
    const open: Array<{ name: string; link?: { href: string; text: string[] } }> = [];
    const openLinks: Array<{ href: string; text: string[] }> = [];
    let noText = 0;
    let stop: number | undefined;
    const parser = new Parser(
      {
        onopentag(name, attribs) {
          if (open.length >= MAX_DEPTH) {
            stop = parser.startIndex;
            parser.pause();
            return;
          }
          if (NO_TEXT.has(name)) noText++;
          const link = name === 'a' && attribs.href ? { href: attribs.href, text: [] } : undefined;
          if (link) openLinks.push(link);
          open.push({ name, link });
        },
        ontext(t) {
          if (noText > 0) return;
          text.push(t);
          for (const l of openLinks) l.text.push(t);
        },
        oncomment(t) {
          const c = squash(t);
          if (c) comments.push(c);
        },
        onclosetag() {
          if (stop !== undefined) return;
          // htmlparser2 closes its elements in order, the innermost first.
          const e = open.pop();
          if (e && NO_TEXT.has(e.name)) noText--;
          if (e?.link) links.push({ href: e.link.href, text: squash(openLinks.pop()!.text.join(' ')) });
        },
      },
      { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
    );
    parser.write(at === 0 ? html : html.slice(at));
    if (stop === undefined) parser.end();
    for (const l of openLinks) links.push({ href: l.href, text: squash(l.text.join(' ')) });
    // A new parser starts at the element that went too deep (at least MAX_DEPTH elements on).
    at = stop === undefined ? html.length : at + stop;
  }
  return { text: squash(text.join(' ')), comments, links };
}

/** Reads `html` (bounded by the caller): its hidden elements, visible text, comments and links. */
export function readHtml(html: string): HtmlReading {
  const sheet: Sheet = new Map();
  const order = { n: 0 };
  const root: Frame = { name: '#root', hidden: false, text: [], colour: [0, 0, 0], background: [255, 255, 255] };
  const stack: Frame[] = [root];
  const cuts: Array<[number, number]> = [];
  const hidden: string[] = [];
  const comments: string[] = [];
  const links: Array<{ href: string; text: string }> = [];
  const visible: string[] = [];
  let styleText: string[] | undefined;
  let noText = 0;
  /** The outermost hidden element open, which collects the text inside it (at most one is open). */
  let hiddenOpen: Frame | undefined;
  /** The open links, each collecting its text (at most MAX_DEPTH). */
  const openLinks: Frame[] = [];
  const top = () => stack[stack.length - 1];
  /** Where the first element nested past MAX_DEPTH starts, when one is. */
  let deepFrom: number | undefined;
  const push = (f: Frame) => {
    stack.push(f);
    if (f.hiddenFrom !== undefined) hiddenOpen = f;
    if (f.link) openLinks.push(f);
  };

  const parser = new Parser(
    {
      onopentag(name, attribs) {
        const parent = top();
        if (stack.length > MAX_DEPTH) {
          deepFrom = parser.startIndex;
          parser.pause();
          return;
        }
        if (name === 'style') styleText = [];
        if (NO_TEXT.has(name)) noText++;
        // Most elements carry nothing that can hide them: they take their parent's state as it is.
        if (!attribs.style && !attribs.class && !attribs.id && !attribs.bgcolor && !('hidden' in attribs) && name !== 'font' && !sheet.has(name)) {
          push({
            name,
            hidden: parent.hidden,
            colour: parent.colour,
            background: parent.background,
            text: [],
            link: name === 'a' && attribs.href ? { href: attribs.href, text: [] } : undefined,
          });
          return;
        }
        // Rules first, then the inline style (which wins).
        const classes = new Set((attribs.class ?? '').split(/\s+/).filter(Boolean));
        const decls = ruleDeclarations(sheet, name, classes, attribs.id);
        if (attribs.style) for (const [k, v] of declarations(attribs.style)) decls.set(k, v);
        const bgValue = decls.get('background-color') ?? (decls.get('background') && /^(#|rgb|[a-z]+$)/.test(decls.get('background')!) ? decls.get('background')!.split(/\s+/)[0] : undefined);
        const bgAttr = attribs.bgcolor;
        const bg = colour(bgValue ?? bgAttr);
        // A background image or gradient: the text's contrast cannot be judged.
        const unknownBg = /url\(|gradient\(/.test(decls.get('background') ?? '') || decls.has('background-image');
        const fg = colour(decls.get('color') ?? (name === 'font' ? attribs.color : undefined));
        const frame: Frame = {
          name,
          hidden: parent.hidden,
          colour: fg === 'transparent' ? parent.background : (fg ?? parent.colour),
          background: unknownBg ? undefined : bg === 'transparent' || bg === undefined ? parent.background : bg,
          text: [],
        };
        let why = hiddenBy(decls) ?? ('hidden' in attribs ? 'hidden attribute' : undefined);
        if (!why && name === 'font' && attribs.size !== undefined && /^\s*[-+]?0\s*$/.test(attribs.size)) why = 'font size=0';
        if (!why && fg === 'transparent') why = 'color:transparent';
        if (!why && fg && fg !== 'transparent' && frame.background && frame.colour) {
          const d = frame.colour.reduce((sum, c, i) => sum + Math.abs(c - frame.background![i]), 0);
          if (d <= HIDDEN_STYLE.colourDistance) why = `text colour ${decls.get('color') ?? attribs.color} on a background of the same colour`;
        }
        if (why && !parent.hidden) {
          frame.hiddenFrom = parser.startIndex;
          frame.hiddenWhy = why;
        }
        if (why) frame.hidden = true;
        if (name === 'a' && attribs.href) frame.link = { href: attribs.href, text: [] };
        push(frame);
      },
      ontext(text) {
        if (styleText) styleText.push(text);
        if (noText > 0) return;
        hiddenOpen?.text.push(text);
        for (const f of openLinks) f.link!.text.push(text);
        if (!top().hidden) visible.push(text);
      },
      oncomment(text) {
        const t = squash(text);
        if (t) comments.push(t);
      },
      onclosetag(name) {
        if (deepFrom !== undefined) return;
        // htmlparser2 closes implied elements itself: pop to the matching frame.
        let i = stack.length - 1;
        while (i > 0 && stack[i].name !== name) i--;
        if (i === 0) return;
        while (stack.length > i) {
          const f = stack.pop()!;
          if (NO_TEXT.has(f.name)) noText--;
          if (f.name === 'style' && styleText) {
            readStyleSheet(styleText.join(''), sheet, order);
            styleText = undefined;
          }
          if (f === hiddenOpen) hiddenOpen = undefined;
          if (f.link) openLinks.pop();
          if (f.link) links.push({ href: f.link.href, text: squash(f.link.text.join(' ')) });
          if (f.hiddenFrom !== undefined) {
            cuts.push([f.hiddenFrom, parser.endIndex + 1]);
            const t = squash(f.text.join(' '));
            if (t) hidden.push(t);
          }
          if (BLOCK.has(f.name)) visible.push('\n');
        }
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  if (deepFrom === undefined) parser.end();
  // Elements never closed run to the end.
  for (const f of stack.slice(1)) {
    if (f.hiddenFrom !== undefined) {
      cuts.push([f.hiddenFrom, html.length]);
      const t = squash(f.text.join(' '));
      if (t) hidden.push(t);
    }
    if (f.link) links.push({ href: f.link.href, text: squash(f.link.text.join(' ')) });
  }
  if (deepFrom !== undefined) {
    cuts.push([deepFrom, html.length]);
    const rest = readUnshown(html.slice(deepFrom));
    if (rest.text) hidden.push(rest.text);
    comments.push(...rest.comments);
    links.push(...rest.links);
  }
  let visibleHtml = html;
  if (cuts.length) {
    cuts.sort((a, b) => a[0] - b[0]);
    const parts: string[] = [];
    let at = 0;
    for (const [from, to] of cuts) {
      // One inside or overlapping another (an element closed by the next one's tag): joined.
      if (from < at) {
        at = Math.max(at, to);
        continue;
      }
      parts.push(html.slice(at, from));
      at = to;
    }
    parts.push(html.slice(at));
    visibleHtml = parts.join('');
  }
  return {
    visibleHtml,
    hidden,
    comments,
    links,
    // Whitespace as it came: the screener's normalise collapses it, and collapsing it here too
    // was half of this function's time (a `\s*\n\s*` pass over every space).
    visibleText: visible.join(' ').trim(),
  };
}
