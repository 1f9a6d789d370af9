// Search against a generated corpus: 2,000+ varied messages (multilingual subjects and bodies
// with accents, display names, Cc, labels, read and unread, inbound and outbound, attachments
// with filenames, dates over two years) stored through the real paths — acceptInbound, the
// function the SMTP listener calls, for received mail; POST /inboxes/{id}/messages for sent
// mail — then every query form of `q` (PRODUCT.md) checked against an oracle computed here
// from the generated data alone, with a tokenizer of its own (letter and digit runs, case and
// accents folded: what FTS5's unicode61 remove_diacritics does).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { acceptInbound } from '../../src/domain/inbound/inbound.ts';
import { findInboxByAddress } from '../../src/domain/inboxes/inboxes.ts';
import { updateMessage } from '../../src/domain/mail/messages.ts';
import { matchFilters } from '../../src/domain/mail/filters.ts';
import { matchMessages } from '../../src/store/repo/message-search.ts';
import { dialectOf, rawRows } from '../../src/store/store.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const INBOUND = 1700;
const OUTBOUND = 320;

/** Deterministic: the same corpus on every run (mulberry32). */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}
const random = rng(20240108);
const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)];
const some = <T>(list: readonly T[], max: number): T[] => [...new Set(Array.from({ length: Math.floor(random() * (max + 1)) }, () => pick(list)))];

// Letters whose accents Unicode decomposes (é = e + ◌́), so folding is unambiguous.
const WORDS = [
  'invoice',
  'Rechnung',
  'facture',
  'factura',
  'fattura',
  'fatura',
  'report',
  'Bericht',
  'informe',
  'rapport',
  'résumé',
  'café',
  'naïve',
  'Übersicht',
  'mañana',
  'crème',
  'société',
  'niño',
  'façade',
  'jalapeño',
  'Zürich',
  'São',
  'Paulo',
  'contract',
  'Vertrag',
  'contrat',
  'contrato',
  'meeting',
  'Besprechung',
  'réunion',
  'reunión',
  'riunione',
  'quarterly',
  'budget',
  'Übergabe',
  'déjà',
  'vu',
  'año',
  'pingüino',
  'über',
  'Köln',
  'Málaga',
  'shipment',
  'Lieferung',
  'livraison',
  'envío',
  'consegna',
  'entrega',
  'urgent',
  'dringend',
  'approval',
  'Genehmigung',
  'approbation',
  'aprobación',
];
const NAMES = [
  'Anna Müller',
  'José García',
  'François Dupont',
  'Zoë Brontë',
  'Chloé Martin',
  'Jürgen Weiß',
  'Inès Lefèvre',
  'Ana Conceição',
  'Giulia Rossi',
  'Émile Zola',
  'Noël Coward',
  'Bob Smith',
  'Renée Fleming',
  'Añil Ruiz',
];
const DOMAINS = ['example.com', 'beispiel.de', 'exemple.fr', 'ejemplo.es', 'esempio.it'];
const FILES = [
  'Rechnung_2024-03.pdf',
  'Quarterly Report Q3.xlsx',
  'résumé-final.docx',
  'contrat signé.pdf',
  'photo_café.jpg',
  'Übersicht.csv',
  'notes.txt',
  'invoice-8841.pdf',
  'Lieferschein 17.pdf',
  'presupuesto_año.xlsx',
];
const LABELS = ['urgent', 'finance', 'hr', 'todo', 'clients:acme', 'waiting'];

const addressOf = (name: string) =>
  `${name
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^a-z]+/g, '.')
    .replace(/^\.|\.$/g, '')}@${pick(DOMAINS)}`;
const sentence = (min: number, max: number) => Array.from({ length: min + Math.floor(random() * (max - min + 1)) }, () => pick(WORDS)).join(' ');

interface Doc {
  id: string;
  inbox: string;
  direction: 'inbound' | 'outbound';
  fromAddress: string;
  fromName: string;
  to: string[];
  cc: string[];
  subject: string;
  body: string;
  files: string[];
  labels: string[];
  unread: boolean;
  day: string;
}

// --- the oracle ---------------------------------------------------------------------------

const tokens = (text: string) =>
  text
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .match(/[\p{L}\p{N}]+/gu) ?? [];

/** The token sequence `want` occurs in `have` (the last token as a prefix when `prefix`). */
function occurs(have: string[], want: string[], prefix: boolean): boolean {
  if (!want.length) return false;
  for (let i = 0; i + want.length <= have.length; i++) {
    if (want.every((w, j) => (prefix && j === want.length - 1 ? have[i + j].startsWith(w) : have[i + j] === w))) return true;
  }
  return false;
}

const FIELDS: Record<string, (d: Doc) => string[]> = {
  any: (d) => [d.subject, d.body, d.fromAddress, d.fromName, JSON.stringify(d.to), JSON.stringify(d.cc)],
  from: (d) => [d.fromAddress, d.fromName],
  to: (d) => [JSON.stringify(d.to), JSON.stringify(d.cc)],
  cc: (d) => [JSON.stringify(d.cc)],
  subject: (d) => [d.subject],
};

type Pred = (d: Doc) => boolean;
const inField = (field: string, value: string, prefix: boolean): Pred => {
  const want = tokens(value);
  return (d) => FIELDS[field](d).some((text) => occurs(tokens(text), want, prefix));
};
const inFile = (value: string, prefix: boolean): Pred => {
  const want = tokens(value);
  return (d) => d.files.some((f) => occurs(tokens(f), want, prefix));
};

/** The oracle of one query: written independently of src/domain/mail/search.ts, from PRODUCT.md's rules. */
function oracle(q: string): Pred {
  const preds: Pred[] = [];
  const re = /(-?)(?:(from|to|cc|subject|label|is|has|filename|in|before|after):)?("([^"]*)"|\S+)/g;
  // `a OR b`: the term after OR joins the one before it as an alternative.
  let or = false;
  for (const m of q.matchAll(re)) {
    const [, neg, op, raw, phrase] = m;
    if (raw === 'OR' && !neg && !op) {
      or = true;
      continue;
    }
    const quoted = phrase !== undefined;
    const value = quoted ? phrase : raw;
    let p: Pred;
    switch (op) {
      case undefined:
        p = (
          (a: Pred, b: Pred) => (d: Doc) =>
            a(d) || b(d)
        )(inField('any', value, !quoted), inFile(value, !quoted));
        break;
      case 'label':
        p = (d) => d.labels.includes(value);
        break;
      case 'is':
        p = (d) => d.unread === (value === 'unread');
        break;
      case 'has':
        p = (d) => d.files.length > 0;
        break;
      case 'filename':
        p = inFile(value, !quoted);
        break;
      case 'in':
        p = (d) => d.direction === value;
        break;
      case 'before':
        p = (d) => d.day < value;
        break;
      case 'after':
        p = (d) => d.day >= value;
        break;
      default:
        p = inField(op, value, !quoted);
    }
    const term = neg ? (d: Doc) => !p(d) : p;
    if (or) {
      const before = preds.pop()!;
      preds.push((d) => before(d) || term(d));
    } else preds.push(term);
    or = false;
  }
  return (d) => preds.every((p) => p(d));
}

// --- the corpus ---------------------------------------------------------------------------

let t: TestServer;
const docs: Doc[] = [];
const inboxes: Array<{ id: string; address: string }> = [];

async function composeRaw(d: Omit<Doc, 'id' | 'inbox' | 'day'>, to: string, date: Date): Promise<Buffer> {
  return new MailComposer({
    from: { name: d.fromName, address: d.fromAddress },
    to,
    cc: d.cc,
    subject: d.subject,
    text: d.body,
    date,
    attachments: d.files.map((filename) => ({ filename, content: `bytes of ${filename}` })),
  })
    .compile()
    .build();
}

async function inParallel<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

before(async () => {
  t = await startTestServer({ limits: { requests_per_minute: 1_000_000, daily_send_limit: 100_000 } });
  for (const name of ['corpus-a', 'corpus-b', 'corpus-c']) inboxes.push((await t.api('POST', '/inboxes', { address: name })).body);
  const start = Date.UTC(2023, 0, 1);
  const span = 730 * 86_400_000;
  const planned = Array.from({ length: INBOUND }, () => {
    const fromName = pick(NAMES);
    const inbox = pick(inboxes);
    const date = new Date(start + Math.floor(random() * span));
    return {
      inbox,
      date,
      doc: {
        direction: 'inbound' as const,
        fromAddress: addressOf(fromName),
        fromName,
        to: [inbox.address],
        cc: some(NAMES, 2).map(addressOf),
        subject: sentence(1, 4),
        body: sentence(3, 25),
        files: random() < 0.3 ? some(FILES, 2) : [],
        labels: random() < 0.4 ? some(LABELS, 2) : [],
        unread: random() < 0.6,
      },
    };
  });
  await inParallel(planned, 16, async ({ inbox, date, doc }) => {
    const raw = await composeRaw(doc, inbox.address, date);
    const row = (await findInboxByAddress(t.server.ctx, inbox.address))!;
    const { messageIds } = await acceptInbound(t.server.ctx, { raw, mailFrom: doc.fromAddress, recipients: [row], skipAuthentication: true, receivedAt: date });
    docs.push({ ...doc, id: messageIds[0], inbox: inbox.id, day: date.toISOString().slice(0, 10) });
  });
  // Uploads for the sent messages' attachments, each sent several times.
  const uploads = new Map<string, string>();
  for (const f of FILES) {
    const fd = new FormData();
    fd.append('file', new Blob([`bytes of ${f}`]), f);
    uploads.set(f, (await (await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: fd })).json()).id);
  }
  await inParallel(
    Array.from({ length: OUTBOUND }, (_, i) => i),
    4,
    async () => {
      const inbox = pick(inboxes);
      const to = some(NAMES, 2).map(addressOf);
      const toList = to.length ? to : [addressOf(pick(NAMES))];
      const cc = some(NAMES, 1).map(addressOf);
      const files = random() < 0.3 ? some(FILES, 2) : [];
      const subject = sentence(1, 4);
      const body = sentence(3, 20);
      const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: toList, cc, subject, bodyText: body, attachmentIds: files.map((f) => uploads.get(f)!) });
      assert.equal(res.status, 202, res.text);
      const m = res.body;
      docs.push({
        id: m.id,
        inbox: inbox.id,
        direction: 'outbound',
        fromAddress: m.fromAddress,
        fromName: m.fromName ?? '',
        to: m.toAddresses,
        cc: m.ccAddresses,
        subject,
        body,
        files,
        labels: [],
        unread: false,
        day: m.createdAt.slice(0, 10),
      });
    },
  );
  // Read state and labels through the same domain call as PATCH /messages/{id}.
  for (const d of docs) {
    if (d.direction === 'inbound' && (!d.unread || d.labels.length)) await updateMessage(t.server.ctx, t.accountId, d.id, { unread: d.unread, addLabels: d.labels });
    if (d.direction === 'outbound' && random() < 0.2) {
      d.labels = some(LABELS, 1);
      await updateMessage(t.server.ctx, t.accountId, d.id, { addLabels: d.labels });
    }
  }
});

after(async () => {
  await t?.close();
});

/** Every id the API lists for `q` (all pages, past the ranked matches too), and its total. */
async function search(path: string, q: string): Promise<{ ids: string[]; total: number; totalIsLowerBound: boolean }> {
  const ids: string[] = [];
  let total = 0;
  let totalIsLowerBound = false;
  for (let offset = 0; ; offset += 100) {
    const res = await t.api('GET', `${path}?q=${encodeURIComponent(q)}&limit=100&offset=${offset}`);
    assert.equal(res.status, 200, `${q}: ${res.text}`);
    ({ total, totalIsLowerBound } = res.body);
    ids.push(...res.body.data.map((m: { id: string }) => m.id));
    if (res.body.data.length < 100) break;
  }
  return { ids, total, totalIsLowerBound };
}

/** The total a search reports for `n` matches: exact up to limits.search_matches, that bound past it. */
const expectTotal = (got: { total: number; totalIsLowerBound: boolean }, n: number, what: string) => {
  const cap = t.config.limits.search_matches;
  assert.deepEqual([got.total, got.totalIsLowerBound], n > cap ? [cap, true] : [n, false], `${what}: total`);
};

const QUERIES = [
  // words: all must match, prefixes, accents and case folded
  'invoice',
  'rechnung',
  'RECHN',
  'resume',
  'résumé',
  'cafe',
  'zurich',
  'sao paulo',
  'über',
  'uber',
  'mañana manana',
  'quarterly report',
  'fact',
  'niño',
  'pinguino',
  'deja vu',
  'Köln Málaga',
  // phrases
  '"sao paulo"',
  '"deja vu"',
  '"report informe"',
  '"quarterly"',
  '"bericht"',
  // operators
  'from:anna',
  'from:"Anna Müller"',
  'from:muller',
  'from:jose.garcia',
  'from:beispiel',
  'to:corpus-a',
  'to:zoe',
  'cc:ines',
  'cc:exemple.fr',
  'subject:meeting',
  'subject:"contract vertrag"',
  'label:urgent',
  'label:clients:acme',
  'is:unread',
  'is:read',
  'has:attachment',
  'in:inbound',
  'in:outbound',
  'before:2024-01-01',
  'after:2024-06-30',
  'after:2023-03-01 before:2023-04-01',
  'filename:rechnung',
  'filename:resume',
  'filename:"quarterly report"',
  'filename:pdf',
  'filename:uber',
  'filename:17',
  'filename:presupuesto',
  // words also in filenames
  'lieferschein',
  'presupuesto invoice',
  'signe',
  // negation and combinations
  '-invoice',
  'invoice -rechnung',
  '-from:anna in:inbound',
  'has:attachment -filename:pdf',
  '-label:urgent label:finance',
  'is:unread -has:attachment before:2023-07-01',
  'from:anna subject:report',
  'to:corpus-b cc:giulia',
  'in:outbound filename:contrat',
  'budget -"quarterly" is:read',
  'cafe -filename:cafe',
  // OR: words, prefixes, phrases, fields, filenames, conditions, mixed with the other terms
  'zurich OR koln',
  'rechn OR factu',
  '"sao paulo" OR "deja vu"',
  'from:anna OR from:jose',
  'cc:ines OR to:zoe',
  'subject:meeting OR from:bob',
  'lieferschein OR presupuesto',
  'invoice OR from:muller',
  'budget zurich OR koln',
  'zurich OR koln -invoice is:unread',
  'from:anna OR cc:giulia has:attachment',
  'label:urgent OR label:finance',
  'label:hr OR is:unread in:outbound',
  'before:2023-03-01 OR after:2024-10-01 contract',
  'invoice OR report OR meeting OR approval',
];

describe('search corpus', () => {
  test(`${INBOUND + OUTBOUND} messages stored`, () => {
    assert.equal(docs.length, INBOUND + OUTBOUND);
    assert.equal(new Set(docs.map((d) => d.id)).size, docs.length);
  });

  test('every query form, account-wide: exactly the messages the oracle finds', async () => {
    let nonEmpty = 0;
    for (const q of QUERIES) {
      const want = docs
        .filter(oracle(q))
        .map((d) => d.id)
        .sort();
      const got = await search('/messages', q);
      expectTotal(got, want.length, q);
      assert.deepEqual([...got.ids].sort(), want, `${q}: ids`);
      if (want.length) nonEmpty++;
    }
    // The corpus exercises the queries: nearly all find something, none finds everything.
    assert.ok(nonEmpty >= QUERIES.length - 3, `${nonEmpty} of ${QUERIES.length} queries found something`);
  });

  test('per inbox and on thread lists', async () => {
    const inbox = inboxes[1];
    for (const q of ['invoice', 'from:anna', 'filename:pdf', 'is:unread -has:attachment', 'report -label:urgent']) {
      const want = docs
        .filter((d) => d.inbox === inbox.id)
        .filter(oracle(q))
        .map((d) => d.id)
        .sort();
      const got = await search(`/inboxes/${inbox.id}/messages`, q);
      assert.deepEqual([...got.ids].sort(), want, `${q}: ids`);
      expectTotal(got, want.length, q);
      // Each message is its own thread here (no replies): the threads of the matching messages.
      const threads = await t.api('GET', `/inboxes/${inbox.id}/threads?q=${encodeURIComponent(q)}&limit=1`);
      assert.equal(threads.body.total, want.length, `${q}: threads`);
    }
  });

  test('under the cap, the order is the full ranking: every match ranked, as one query over all of them orders them', async () => {
    let ranked = 0;
    for (const q of QUERIES) {
      const f = matchFilters({ q });
      if (!f.search?.positive.length) continue;
      const m = matchMessages({ accountId: t.accountId }, f, dialectOf(t.server.ctx.db));
      const all = await rawRows<[string]>(t.server.ctx.db, `SELECT m.id FROM ${m.from} WHERE ${m.where} ORDER BY ${m.order}`, m.params);
      if (all.length > t.config.limits.search_matches) continue;
      assert.deepEqual(
        (await search('/messages', q)).ids,
        all.map(([id]) => id),
        q,
      );
      ranked++;
    }
    assert.ok(ranked >= 15, `${ranked} ranked queries under the cap`);
  });

  test('with words, results come best first: a message with the word in its subject and body outranks one with it once', async () => {
    const res = await t.api('GET', `/messages?q=${encodeURIComponent('jalapeno')}&limit=100`);
    const count = (d: Doc) => tokens(`${d.subject} ${d.body}`).filter((w) => w === 'jalapeno').length;
    const byId = new Map(docs.map((d) => [d.id, d]));
    const counts = res.body.data.map((m: { id: string }) => count(byId.get(m.id)!));
    assert.ok(counts.length > 5);
    assert.ok(counts[0] >= counts[counts.length - 1], `first ${counts[0]}, last ${counts[counts.length - 1]}`);
  });
});
