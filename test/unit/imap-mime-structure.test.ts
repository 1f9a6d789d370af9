// BODYSTRUCTURE line counts and HEADER.FIELDS (src/imap/mime.ts): each part's lines as counting
// its own body gives, though counted once per part; header fields picked by name, any case.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bodyStructureOf, parseMime, sectionOf, type ImapValue } from '../../src/imap/mime.ts';

const naiveLines = (buf: Buffer): number => {
  const feeds = [...buf].filter((b) => b === 10).length;
  return buf.length && buf[buf.length - 1] !== 10 ? feeds + 1 : feeds;
};

/** [type/subtype, lines] of every part with a line count, in BODYSTRUCTURE order. */
function counted(structure: ImapValue[]): Array<[string, number]> {
  if (Array.isArray(structure[0])) return structure.filter(Array.isArray).flatMap((p) => counted(p as ImapValue[]));
  const type = `${String(structure[0])}/${String(structure[1])}`;
  if (type === 'message/rfc822') return [[type, structure[9] as number], ...counted(structure[8] as ImapValue[])];
  return type.startsWith('text/') ? [[type, structure[7] as number]] : [];
}

const nested = (inner: string, depth: number): string => {
  let msg = inner;
  for (let i = 0; i < depth; i++) msg = `Subject: level ${i}\r\nContent-Type: message/rfc822\r\n\r\n${msg}`;
  return msg;
};

test('lines of nested messages and multiparts: as counting each body, preamble and trailing text included', () => {
  const leaf = 'Subject: leaf\r\n\r\none\r\ntwo\r\nthree without end';
  const multi = [
    'Content-Type: multipart/mixed; boundary="b"',
    '',
    'preamble',
    'second preamble line',
    '--b',
    'Content-Type: text/plain',
    '',
    'a',
    'b',
    '--b',
    'Content-Type: message/rfc822',
    '',
    nested(leaf, 3),
    '--b',
    '',
    '--b--',
    'epilogue',
    'more',
  ].join('\r\n');
  const source = Buffer.from(nested(multi, 4) + '\r\n');
  const root = parseMime(source);
  const parts = counted(bodyStructureOf(root, true));
  // The nodes in the same order, each line count from its own body.
  const want: Array<[string, number]> = [];
  const walk = (n: ReturnType<typeof parseMime>) => {
    if (n.type === 'multipart') return n.children.forEach(walk);
    if (n.inner) {
      want.push(['message/rfc822', naiveLines(n.body)]);
      return walk(n.inner);
    }
    if (n.type === 'text') want.push([`${n.type}/${n.subtype}`, naiveLines(n.body)]);
  };
  walk(root);
  assert.deepEqual(parts, want);
  assert.deepEqual(
    parts.map((p) => p[0]),
    ['message/rfc822', 'message/rfc822', 'message/rfc822', 'message/rfc822', 'text/plain', 'message/rfc822', 'message/rfc822', 'message/rfc822', 'message/rfc822', 'text/plain', 'text/plain'],
  );
  assert.equal(parts[0][1], 40);
  assert.equal(parts[9][1], 3);
});

test('31 nested messages over a million line feeds: every level counted', () => {
  const root = parseMime(Buffer.from(nested(`Subject: leaf\r\n\r\n${'\n'.repeat(1_000_000)}`, 31)));
  const parts = counted(bodyStructureOf(root, false));
  assert.equal(parts.length, 32);
  // Each level adds its header (three lines) to the one inside it.
  assert.deepEqual(
    parts.map((p) => p[1]),
    Array.from({ length: 32 }, (_, i) => (i === 31 ? 1_000_000 : 1_000_002 + 3 * (30 - i))),
  );
});

test('HEADER.FIELDS and HEADER.FIELDS.NOT: names in any case, folded lines kept with their field', () => {
  const root = parseMime(Buffer.from('From: a@x\r\nSubject: one\r\n two\r\nX-Tag: t\r\nTo: b@x\r\n\r\nbody'));
  assert.equal(sectionOf(root, 'HEADER.FIELDS', ['SUBJECT', 'to'])?.toString(), 'Subject: one\r\n two\r\nTo: b@x\r\n\r\n');
  assert.equal(sectionOf(root, 'HEADER.FIELDS.NOT', ['subject', 'X-TAG'])?.toString(), 'From: a@x\r\nTo: b@x\r\n\r\n');
  assert.equal(sectionOf(root, 'HEADER.FIELDS', ['nothing'])?.toString(), '\r\n');
});
