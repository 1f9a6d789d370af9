// The search column of a PostgreSQL message row, built by mailroom (src/store/search-vector.ts)
// for ASCII text instead of by the server's text parser (migration pg/0023): it must be exactly
// the tsvector the server's expression gives, on every text, or searches would find different
// messages depending on who built the column. Compared here against the server's own expression,
// on generated and hostile text; then the inbound path: a message received over SMTP carries it,
// and a message with text outside ASCII gets the server's.

// PostgreSQL pass only: the column is PostgreSQL's (build/test.sh leaves this file out of the
// SQLite pass; run on SQLite, it declares nothing: onEngine).
import assert from 'node:assert/strict';
import pg from 'pg';
import { peerSkip } from '../support/peers.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { onEngine, startTestServer } from '../support/server.ts';
import { smtpTransport } from '../support/mail.ts';
import { SEARCH_VECTOR_MAX_CHARS, searchVector, type SearchFields } from '../../src/store/search-vector.ts';

/** The trigger's expression (migration pg/0023) on $1-$6. */
const SERVER = `setweight(to_tsvector('mailroom'::regconfig, mailroom_words($1)), 'A') ||
  setweight(to_tsvector('mailroom'::regconfig, mailroom_words($2) || ' ' || mailroom_words($3)), 'B') ||
  setweight(to_tsvector('mailroom'::regconfig, mailroom_words($4) || ' ' || mailroom_words($5)), 'C') ||
  setweight(to_tsvector('mailroom'::regconfig, left(mailroom_words($6), 262144)), 'D')`;
const PUNCTUATION = '@._-/:+~=#%&?!*|\\<>[](){},;"\'`^$';

onEngine('postgres').test('the search column built by mailroom is the tsvector the server computes, on every ASCII text', { skip: peerSkip(postgresMissing()) }, async () => {
  const client = new pg.Client({ connectionString: await (await pgCluster()).createMigratedDatabase() });
  await client.connect();
  // The server's NOTICEs about words too long to index.
  client.on('notice', () => undefined);
  try {
    let seed = 11;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
    const alphabet = [...'aZq09Xy', ...PUNCTUATION, ' ', '\n', '\r\n', '\t', '\x01', '\x7f', '\f', '\v'];
    const words = ['Alpha', 'beta', 'GAMMA', 'x', 'e', 'E', '42', '1st', '0x1F', '3e', '12e', '5E5x', 'a3e5b', '007', '1234567890123456789012345', 'a1b2', 'resume'];
    // Most texts without the words that make a number in scientific notation where they meet (12e5).
    const plain = words.filter((w) => !/^[0-9]*[eE]$|[0-9][eE][0-9]/.test(w));
    let risky = false;
    const randomText = (n: number) => Array.from({ length: n }, () => (random() < 0.5 ? pick(risky ? words : plain) : pick(alphabet))).join(random() < 0.3 ? '' : ' ');
    const cases: SearchFields[] = [
      { subject: '', fromAddress: '', fromName: null, toAddresses: '[]', ccAddresses: '[]', bodyText: null },
      {
        subject: 'Hello',
        fromAddress: 'alice@example.org',
        fromName: 'Alice Smith',
        toAddresses: '["bob@example.org"]',
        ccAddresses: '["carol@example.org"]',
        bodyText: 'Hello Bob,\r\nsee q3-report_final.pdf at https://example.org/a?b=c#d\r\n',
      },
      // The same word in every field, numbered across the concatenations.
      { subject: 'same same', fromAddress: 'same@same', fromName: 'same', toAddresses: '["same@x"]', ccAddresses: '[]', bodyText: 'same '.repeat(10) },
      // Words at and past the length limits (a literal takes 2,046 bytes; the parser skips 2,048).
      { subject: 'a'.repeat(2046), fromAddress: 'b'.repeat(2048), fromName: 'c'.repeat(5000), toAddresses: '[]', ccAddresses: '[]', bodyText: `x ${'d'.repeat(2048)} y ${'e'.repeat(2046)} z` },
      // A word more often than a field keeps numbers (255), and again after the concatenation (256).
      { subject: 'word '.repeat(300), fromAddress: '', fromName: null, toAddresses: '[]', ccAddresses: '[]', bodyText: 'word '.repeat(300) },
      { subject: 'Word word WORD '.repeat(100), fromAddress: 'WoRd', fromName: null, toAddresses: '[]', ccAddresses: '[]', bodyText: 'wORD Word '.repeat(150) },
      { subject: 'word '.repeat(200), fromAddress: 'word', fromName: 'word', toAddresses: '["word"]', ccAddresses: '[]', bodyText: 'word other '.repeat(100) },
      // Past 16,383 words, numbers stop at 16,383; up to the 65,536 characters built here.
      { subject: 'start', fromAddress: '', fromName: null, toAddresses: '[]', ccAddresses: '[]', bodyText: Array.from({ length: 17_000 }, (_, i) => `w${i % 9}`).join(' ') },
      { subject: 's', fromAddress: '', fromName: null, toAddresses: '[]', ccAddresses: '[]', bodyText: `${'ab '.repeat(21_800)}cdefgh tail` },
      { subject: 's '.repeat(9000), fromAddress: 'f '.repeat(9000), fromName: null, toAddresses: '[]', ccAddresses: '[]', bodyText: 'late words here' },
      // Thousands of different words, each seen again in other cases (the word table matches them in place).
      {
        subject: Array.from({ length: 300 }, (_, i) => `KEY${(i * 7).toString(36)}`).join(' '),
        fromAddress: '',
        fromName: null,
        toAddresses: '[]',
        ccAddresses: '[]',
        bodyText: Array.from({ length: 6000 }, (_, i) => (i % 3 ? `Key${i.toString(36)}` : `kEy${(i >> 1).toString(36)}`)).join(' '),
      },
      { subject: PUNCTUATION, fromAddress: `a${PUNCTUATION}b`, fromName: PUNCTUATION.split('').join('x'), toAddresses: '[]', ccAddresses: '[]', bodyText: `1${PUNCTUATION}2` },
    ];
    for (let i = 0; i < 1500; i++) {
      risky = i >= 1000;
      cases.push({
        subject: randomText(Math.floor(random() * 12)),
        fromAddress: randomText(Math.floor(random() * 4)),
        fromName: random() < 0.3 ? null : randomText(Math.floor(random() * 4)),
        toAddresses: JSON.stringify([randomText(3)]),
        ccAddresses: random() < 0.5 ? '[]' : JSON.stringify([randomText(3), randomText(2)]),
        bodyText: random() < 0.1 ? null : randomText(Math.floor(random() * 400)),
      });
    }
    let compared = 0;
    for (const f of cases) {
      const vector = searchVector(f);
      if (vector === null) {
        // Left to the server only for a number in scientific notation (below).
        assert.match([f.subject, f.fromAddress, f.fromName, f.toAddresses, f.ccAddresses, f.bodyText].join(' '), /(^|[^A-Za-z0-9])[0-9]+[eE][0-9]/);
        continue;
      }
      compared++;
      const { rows } = await client.query(`SELECT $7::tsvector = (${SERVER}) AS same, (${SERVER})::text AS server, $7::tsvector::text AS ours`, [
        f.subject,
        f.fromAddress,
        f.fromName,
        f.toAddresses,
        f.ccAddresses,
        f.bodyText,
        vector,
      ]);
      assert.ok(rows[0].same, `on ${JSON.stringify(f).slice(0, 200)}:\n server ${String(rows[0].server).slice(0, 300)}\n ours   ${String(rows[0].ours).slice(0, 300)}`);
    }
    assert.ok(compared > 1000, `${compared} compared`);
    // Text outside ASCII is left to the server, and so are a word of 2,047 bytes, which the server
    // indexes but a literal cannot hold, and numbers in scientific notation, which it splits off.
    // And text past SEARCH_VECTOR_MAX_CHARS, which would hold the main thread longer.
    for (const text of ['résumé', 'Straße', 'naïve', '日本', 'emoji 😀', 'quote ’s', 'nbsp\u00a0x', `x ${'f'.repeat(2047)} y`, '3e5beta', 'x 12E7', 'ab '.repeat(SEARCH_VECTOR_MAX_CHARS / 3 + 1)]) {
      assert.equal(searchVector({ ...cases[1]!, bodyText: text }), null, text);
      assert.equal(searchVector({ ...cases[1]!, fromName: text }), null, text);
    }
  } finally {
    await client.end();
  }
});

onEngine('postgres').test('mail received over SMTP carries its search column; text outside ASCII gets the server’s', { skip: peerSkip(postgresMissing()) }, async () => {
  const t = await startTestServer();
  const transport = smtpTransport(t.server.smtpPort);
  const db = new pg.Client({ connectionString: t.config.database.url });
  await db.connect();
  try {
    const inbox = (await t.api('POST', '/inboxes', { address: 'vectors' })).body;
    const receive = async (subject: string, text: string) => {
      const info = await transport.sendMail({ from: 'Zed Q <zed@example.org>', to: inbox.address, subject, text });
      return /stored as (msg_\w+)/.exec(info.response ?? '')![1]!;
    };
    const column = async (id: string) =>
      (
        await db.query(
          `SELECT fts::text AS fts, fts = (${SERVER.replaceAll('$1', 'subject').replaceAll('$2', 'from_address').replaceAll('$3', 'from_name').replaceAll('$4', 'to_addresses').replaceAll('$5', 'cc_addresses').replaceAll('$6', 'body_text')}) AS same FROM messages WHERE id = $1`,
          [id],
        )
      ).rows[0] as { fts: string | null; same: boolean | null };
    // Without the trigger, only what mailroom sent is in the column.
    await db.query('ALTER TABLE messages DISABLE TRIGGER messages_fts_insert');
    const ascii = await column(await receive('Quarterly figures', 'The totals are attached, see q3-report.pdf.'));
    assert.ok(ascii.fts?.includes("'quarterly':1A"), String(ascii.fts));
    assert.equal(ascii.same, true);
    const accented = await column(await receive('Résumé', 'Voilà le résumé.'));
    assert.equal(accented.fts, null, 'text outside ASCII: mailroom leaves the column to the server');
    await db.query('ALTER TABLE messages ENABLE TRIGGER messages_fts_insert');
    const served = await column(await receive('Résumé', 'Voilà le résumé.'));
    assert.equal(served.same, true);
    assert.ok(served.fts?.includes("'resume':1A"), String(served.fts));
    // The search finds both kinds (not the one stored while the trigger was off: no column).
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages?q=resume`)).body.total, 1);
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages?q=quarterly`)).body.total, 1);
    // A changed text gets the server's column again (a draft's edit, a held message's release).
    const id = await receive('Before', 'old words');
    await db.query("UPDATE messages SET subject = 'After' WHERE id = $1", [id]);
    const edited = await column(id);
    assert.equal(edited.same, true);
    assert.ok(edited.fts?.includes("'after':1A") && !edited.fts.includes('before'), edited.fts ?? '');
  } finally {
    await db.end();
    transport.close();
    await t.close();
  }
});
