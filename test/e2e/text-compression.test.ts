// On PostgreSQL a message's text and search column are compressed with lz4 when the server has
// it (migration pg/0024: pglz spent twice the server's CPU on a 10 KB body of varied words), and
// read back exactly. On a server without lz4 the migration keeps pglz: then this checks that the
// text is still stored compressed with it and read back exactly.

// PostgreSQL pass only (run on SQLite, it declares nothing: onEngine).
import assert from 'node:assert/strict';
import pg from 'pg';
import { peerSkip } from '../support/peers.ts';
import { postgresMissing } from '../support/postgres.ts';
import { onEngine, startTestServer } from '../support/server.ts';
import { smtpTransport } from '../support/mail.ts';

onEngine('postgres').test('a received message’s text is stored compressed with lz4 where the server has it, and read back exactly', { skip: peerSkip(postgresMissing()) }, async () => {
  const t = await startTestServer();
  const transport = smtpTransport(t.server.smtpPort);
  const db = new pg.Client({ connectionString: t.config.database.url });
  await db.connect();
  try {
    const lz4 = await db.query("SET default_toast_compression = 'lz4'").then(
      () => true,
      () => false,
    );
    const inbox = (await t.api('POST', '/inboxes', { address: 'compressed' })).body;
    const words = ['invoice', 'quarterly', 'figures', 'shipment', 'delayed', 'contract', 'renewal', 'meeting', 'agenda', 'budget'];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
    const text = Array.from({ length: 2000 }, () => `${words[next() % words.length]}${next() % 100}`).join(' ');
    const html = `<p>${text}</p>`;
    const info = await transport.sendMail({ from: 'zed@example.org', to: inbox.address, subject: 'Long', text, html });
    const id = /stored as (msg_\w+)/.exec(info.response ?? '')![1]!;
    const { rows } = await db.query('SELECT pg_column_compression(body_text) AS text, pg_column_compression(body_html) AS html, pg_column_compression(fts) AS fts FROM messages WHERE id = $1', [id]);
    // pglz keeps a value as it is unless it saves a quarter (the search column here it does not).
    if (lz4) assert.deepEqual(rows[0], { text: 'lz4', html: 'lz4', fts: 'lz4' });
    else assert.deepEqual({ text: rows[0].text, html: rows[0].html }, { text: 'pglz', html: 'pglz' });
    const message = (await t.api('GET', `/messages/${id}`)).body;
    assert.equal(message.bodyText.trimEnd(), text);
    assert.equal(message.bodyHtml.trimEnd(), html);
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages?q=shipment`)).body.total, 1);
  } finally {
    await db.end();
    transport.close();
    await t.close();
  }
});
