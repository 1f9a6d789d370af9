// FETCH items (RFC 9051 §6.4.5): which data a FETCH asks for, and one message's response built
// from its row, flags and stored source (read only when an item needs it).
import { AppError } from '../domain/errors.ts';
import { binarySectionOf, bodyStructureOf, envelopeOf, parseMime, sectionOf, type ImapValue, type MimeNode } from './mime.ts';
import { atom, utf8, type ImapNode } from './wire.ts';

export interface FetchItem {
  /** The name as answered: "UID", "BODY[1.MIME]<0>", "RFC822.SIZE"... */
  name: string;
  kind: 'UID' | 'FLAGS' | 'INTERNALDATE' | 'RFC822.SIZE' | 'ENVELOPE' | 'BODYSTRUCTURE' | 'BODY' | 'SECTION' | 'BINARY' | 'BINARY.SIZE';
  section?: string;
  fields?: string[];
  partial?: [number, number?];
  /** BODY[...] without PEEK, RFC822, RFC822.TEXT: the message becomes \Seen. */
  marksSeen?: boolean;
}

const MACROS: Record<string, string[]> = {
  ALL: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE'],
  FAST: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE'],
  FULL: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE', 'BODY'],
};

const bad = (what: string): never => {
  throw new AppError('VALIDATION_ERROR', what);
};

function itemOf(node: ImapNode): FetchItem {
  if (!node || Array.isArray(node) || node.type !== 'ATOM') return bad('FETCH items are atoms');
  const name = node.value.toUpperCase();
  if (node.section && (name === 'BINARY' || name === 'BINARY.PEEK' || name === 'BINARY.SIZE')) {
    const part = node.section.map((p) => (p && !Array.isArray(p) ? String(p.value) : '')).join('');
    const partial = node.partial ? ([node.partial[0], node.partial[1]] as [number, number?]) : undefined;
    if (name === 'BINARY.SIZE') return { name: `BINARY.SIZE[${part}]`, kind: 'BINARY.SIZE', section: part };
    return { name: `BINARY[${part}]${partial ? `<${partial[0]}>` : ''}`, kind: 'BINARY', section: part, partial, marksSeen: name === 'BINARY' };
  }
  if (node.section) {
    if (name !== 'BODY' && name !== 'BODY.PEEK') return bad(`${name}[] is not supported`);
    const parts = node.section;
    const head = parts[0] && !Array.isArray(parts[0]) ? String(parts[0].value).toUpperCase() : '';
    const fields = Array.isArray(parts[1]) ? parts[1].map((f) => (f && !Array.isArray(f) ? utf8(f.value) : '')) : undefined;
    const partial = node.partial ? ([node.partial[0], node.partial[1]] as [number, number?]) : undefined;
    const label = `BODY[${head}${fields ? ` (${fields.join(' ').toUpperCase()})` : ''}]${partial ? `<${partial[0]}>` : ''}`;
    return { name: label, kind: 'SECTION', section: head, fields, partial, marksSeen: name === 'BODY' };
  }
  switch (name) {
    case 'UID':
    case 'FLAGS':
    case 'INTERNALDATE':
    case 'RFC822.SIZE':
    case 'ENVELOPE':
    case 'BODYSTRUCTURE':
    case 'BODY':
      return { name, kind: name };
    case 'RFC822':
      return { name, kind: 'SECTION', section: '', marksSeen: true };
    case 'RFC822.HEADER':
      return { name, kind: 'SECTION', section: 'HEADER' };
    case 'RFC822.TEXT':
      return { name, kind: 'SECTION', section: 'TEXT', marksSeen: true };
    default:
      return bad(`unknown FETCH item ${name}`);
  }
}

/** The items of a FETCH's argument (a macro, one item, or a list); UID first when `uid`. */
export function fetchItems(arg: ImapNode, uid: boolean): FetchItem[] {
  let nodes: ImapNode[];
  if (arg && !Array.isArray(arg) && arg.type === 'ATOM' && !arg.section && MACROS[arg.value.toUpperCase()]) {
    nodes = MACROS[arg.value.toUpperCase()].map((value) => ({ type: 'ATOM', value }));
  } else nodes = Array.isArray(arg) ? arg : [arg];
  const items = nodes.map(itemOf);
  if (uid && !items.some((i) => i.kind === 'UID')) items.unshift({ name: 'UID', kind: 'UID' });
  return items;
}

/** Whether any item needs the stored source. */
export const needsSource = (items: FetchItem[]): boolean => items.some((i) => !['UID', 'FLAGS', 'INTERNALDATE', 'RFC822.SIZE'].includes(i.kind));

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** "29-Nov-2026 06:02:02 +0000" (date-time, RFC 9051 §9). */
export function internalDate(iso: string): string {
  const d = new Date(iso);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getUTCDate())}-${MONTHS[d.getUTCMonth()]}-${d.getUTCFullYear()} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000`;
}

export interface FetchSubject {
  uid: number;
  flags: string[];
  createdAt: string;
  size: number;
  source: Buffer | undefined;
}

/** The (name value ...) list of one message's FETCH response. */
export function fetchValues(items: FetchItem[], m: FetchSubject): ImapValue[] {
  const out: ImapValue[] = [];
  let tree: MimeNode | undefined;
  const mime = () => (tree ??= parseMime(m.source ?? Buffer.alloc(0)));
  for (const item of items) {
    switch (item.kind) {
      case 'UID':
        out.push(atom('UID'), m.uid);
        break;
      case 'FLAGS':
        out.push(atom('FLAGS'), m.flags.map(atom));
        break;
      case 'INTERNALDATE':
        out.push(atom('INTERNALDATE'), internalDate(m.createdAt));
        break;
      case 'RFC822.SIZE':
        out.push(atom('RFC822.SIZE'), m.source ? m.source.length : m.size);
        break;
      case 'ENVELOPE':
        out.push(atom('ENVELOPE'), envelopeOf(mime()));
        break;
      case 'BODYSTRUCTURE':
        out.push(atom('BODYSTRUCTURE'), bodyStructureOf(mime(), true));
        break;
      case 'BODY':
        out.push(atom('BODY'), bodyStructureOf(mime(), false));
        break;
      case 'SECTION': {
        let bytes = sectionOf(mime(), item.section ?? '', item.fields) ?? Buffer.alloc(0);
        if (item.partial) bytes = bytes.subarray(item.partial[0], item.partial[1] === undefined ? undefined : item.partial[0] + item.partial[1]);
        out.push(atom(item.name), bytes);
        break;
      }
      case 'BINARY':
      case 'BINARY.SIZE': {
        const decoded = binarySectionOf(mime(), item.section ?? '');
        // RFC 3516 §4.3: an encoding the server cannot undo.
        if (decoded === 'unknown') throw new AppError('VALIDATION_ERROR', `[UNKNOWN-CTE] the Content-Transfer-Encoding of part ${item.section} is unknown`);
        let bytes = decoded ?? Buffer.alloc(0);
        if (item.kind === 'BINARY.SIZE') {
          out.push(atom(item.name), bytes.length);
          break;
        }
        if (item.partial) bytes = bytes.subarray(item.partial[0], item.partial[1] === undefined ? undefined : item.partial[0] + item.partial[1]);
        out.push(atom(item.name), bytes);
        break;
      }
    }
  }
  return out;
}
