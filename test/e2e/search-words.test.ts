// PostgreSQL's search splits words with mailroom_words() (migrations/pg/0004_search.sql): every
// character of a fixed set of 32 becomes a space, so "alice@example.com" is three words as in
// SQLite's FTS5. Migration pg/0019 made it one regexp_replace instead of translate(), which cost
// seven times the server's CPU on a body; the stored tsvectors were kept, so the new form must
// answer exactly as the old one on every text. Compared here, on the database's own function.

// PostgreSQL pass only: the function exists only there (build/test.sh leaves this file out of
// the SQLite pass; run on SQLite, it declares nothing: onEngine).
import assert from 'node:assert/strict';
import pg from 'pg';
import { peerSkip } from '../support/peers.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { onEngine } from '../support/server.ts';

const SET = '@._-/:+~=#%&?!*|\\<>[](){},;"\'`^$';
const TRANSLATE = `translate(coalesce($1, ''), '${SET.replaceAll("'", "''")}', repeat(' ', 32))`;

onEngine('postgres').test('mailroom_words answers as translate() did, on every character of its set and around them', { skip: peerSkip(postgresMissing()) }, async () => {
  assert.equal(SET.length, 32);
  const client = new pg.Client({ connectionString: await (await pgCluster()).createMigratedDatabase() });
  await client.connect();
  try {
    const def = (await client.query("SELECT pg_get_functiondef('mailroom_words(text)'::regprocedure) AS d")).rows[0].d as string;
    assert.match(def, /regexp_replace/, 'migration pg/0019 is applied');
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const alphabet = [...SET, 'a', 'Z', '0', ' ', '\n', '\t', 'é', 'ß', '中', '😀', '\\\\', "''", '-]', '[-'];
    const texts: Array<string | null> = [null, '', SET, `x${SET}y`, ...[...SET].map((c) => `a${c}b${c}${c}é${c}`), 'alice@example.com', 'q3-report_final.pdf', 'https://example.org/a?b=c#d'];
    for (let i = 0; i < 300; i++) texts.push(Array.from({ length: 1 + Math.floor(random() * 60) }, () => alphabet[Math.floor(random() * alphabet.length)]).join(''));
    texts.push(Array.from({ length: 20_000 }, () => alphabet[Math.floor(random() * alphabet.length)]).join(''));
    for (const text of texts) {
      const { rows } = await client.query(`SELECT mailroom_words($1::text) AS now, ${TRANSLATE} AS was`, [text]);
      assert.equal(rows[0].now, rows[0].was, `on ${JSON.stringify(text)?.slice(0, 80)}`);
    }
  } finally {
    await client.end();
  }
});
