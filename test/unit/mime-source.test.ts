// An outbound source of text parts only is written without nodemailer's streams
// (src/outbound/mime.ts, sourceInMemory): the same bytes as the tree's own build(), on bodies
// chosen for the encoders' edges (line lengths around the wrap, trailing blanks, bare LF and
// CR, dots, non-ASCII text that makes quoted-printable or base64, a body past the encoder's
// 64 KB slice) and on random ones; a tree with an attachment is left to build().
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { buildMime, composeMime, sourceInMemory, type ComposeInput } from '../../src/outbound/mime.ts';

const base: ComposeInput = {
  from: { name: 'Ada Lovelace', address: 'ada@example.com' },
  to: [{ name: null, address: 'bob@example.org' }],
  cc: [],
  subject: 'Hello',
  text: 'Hello',
  html: null,
  messageId: '<msg_1@example.com>',
  date: new Date('2026-11-29T23:00:00Z'),
  attachments: [],
};

/** A deterministic generator: each seed gives the same strings on every run. */
function randomText(seed: number, length: number): string {
  const alphabet = ['a', 'b', 'Z', ' ', ' ', '\t', '\n', '\r\n', '\r', '=', '.', 'é', 'ß', '😀', '中', '-', '>', '\u00a0'];
  let x = seed;
  let s = '';
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    s += alphabet[x % alphabet.length];
  }
  return s;
}

const line = (n: number, c = 'x') => c.repeat(n);
const bodies: string[] = [
  'Outbound benchmark message. '.repeat(36),
  '',
  'a',
  'ends with a blank ',
  'ends with a tab\t',
  'ends with blanks   \n',
  'bare\nline\nfeeds\n',
  'crlf\r\nlines\r\n',
  'lone\rcarriage\rreturns',
  'mixed\n\r\n\r\nend',
  '.\n.leading dots\n..\n',
  '= signs =3D and =\n',
  line(75),
  line(76),
  line(77),
  line(75, 'é'),
  `${line(74)} ${line(10)}`,
  `${line(70)}=${line(10)}`,
  line(2000),
  'Grüße aus Köln, schöne Grüße! '.repeat(20),
  '日本語のテキストです。'.repeat(40),
  '😀 '.repeat(100),
  `${'A line of plain text that goes on.\n'.repeat(2100)}trailing blank `,
  ...Array.from({ length: 40 }, (_, i) => randomText(i + 1, 50 + i * 37)),
];

test('text parts: the same bytes as nodemailer build(), text only, HTML only, both', async () => {
  for (const [i, body] of bodies.entries()) {
    for (const parts of [
      { text: body, html: null },
      { text: null, html: `<p>${body}</p>` },
      { text: body, html: `<div>${body}</div>` },
    ]) {
      const tree = await composeMime({ ...base, ...parts, text: parts.text ?? null });
      // In memory first, as buildMime does: building sets some of the tree's fields.
      const inMemory = await sourceInMemory(tree);
      assert.deepEqual(inMemory, await tree.build(), `body ${i} (${JSON.stringify(body.slice(0, 40))}), ${parts.text === null ? 'html' : parts.html === null ? 'text' : 'both'}`);
    }
  }
});

test('headers of every kind are nodemailer’s: names to encode, cc, threading, List-Unsubscribe', async () => {
  const tree = await composeMime({
    ...base,
    from: { name: 'Zoë "Z" Ångström', address: 'zoe@example.com' },
    to: [
      { name: 'Bob, Jr.', address: 'bob@example.org' },
      { name: null, address: 'carol@example.net' },
    ],
    cc: [{ name: '山田太郎', address: 'yamada@example.jp' }],
    subject: `Re: ${'a long subject with ünïcödé that must be folded and encoded '.repeat(4)}`,
    text: 'body\n',
    html: '<p>body</p>',
    inReplyTo: '<parent@example.org>',
    references: ['<root@example.org>', '<parent@example.org>'],
    headers: { 'List-Unsubscribe': '<https://example.com/u/1>, <mailto:u@example.com>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
  });
  const inMemory = await sourceInMemory(tree);
  assert.deepEqual(inMemory, await tree.build());
});

test('a tree with an attachment is not written in memory; buildMime builds it with nodemailer', async () => {
  const input = { ...base, attachments: [{ filename: 'a.txt', contentType: 'text/plain', content: Readable.from([Buffer.from('attached')]) }] };
  assert.equal(await sourceInMemory(await composeMime({ ...input, attachments: [{ ...input.attachments[0], content: Readable.from([Buffer.from('x')]) }] })), undefined);
  const source = (await buildMime(input)).toString();
  assert.match(source, /Content-Disposition: attachment; filename=a\.txt/);
  assert.match(source, /YXR0YWNoZWQ=/);
});

test('every source ends with CRLF and has no bare LF', async () => {
  for (const body of bodies) {
    const source = (await buildMime({ ...base, text: body })).toString('latin1');
    assert.ok(source.endsWith('\r\n'));
    assert.doesNotMatch(source, /(?<!\r)\n/);
  }
});
