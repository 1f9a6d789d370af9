// Deleted mail is gone: after DELETE /inboxes/{id} and a clean stop, no byte of a deleted
// message's body, attachment or sent text remains anywhere under data_dir: not in the events
// that copied the message, not in a stored Idempotency-Key response, not in SQLite's free pages
// or write-ahead log, not in blob files. Another inbox's mail, scanned the same way, is still
// found (the scan can see what it looks for). Deleting one message removes its events too, and
// a repeat of the request that sent it still does not send it again. Events and delivery logs
// are swept after their retention.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { count, eq } from 'drizzle-orm';
import { ConfigError, configFrom } from '../../src/config.ts';
import { events, webhookAttempts } from '../../src/store/schema.ts';
import { sweepEvents } from '../../src/domain/events/events.ts';
import { deliverMail } from '../support/mail.ts';
import { connectPostgres } from '../../src/store/postgres.ts';
import { expectError, knownDatabaseUrl, startTestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { sqlDb } from '../support/db.ts';

const OPTIONS = { outbound: { mode: 'dry-run' } };

/** Every file under `dir` (database, WAL, blobs) that contains `token`. */
function filesContaining(dir: string, token: string): string[] {
  const needle = Buffer.from(token, 'utf8');
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .filter((file) => readFileSync(file).includes(needle));
}

const unique = (label: string) => `${label}-${crypto.randomUUID()}`;

/**
 * Where `token` is kept: files under data_dir and, on PostgreSQL, any row of any table (its text
 * form, or a blob's bytes). What PostgreSQL's own files keep of deleted rows until the space is
 * reused is the database's (docs/several-nodes.md, "Deleting mail").
 */
async function placesContaining(dir: string, token: string): Promise<string[]> {
  const found = filesContaining(dir, token);
  const url = knownDatabaseUrl(dir);
  if (!url) return found;
  const pool = connectPostgres(await url, { max: 1 });
  try {
    const { rows: tables } = await pool.query<{ name: string }>("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'");
    for (const { name } of tables) {
      const where = name === 'blob_chunks' ? "position(convert_to($1, 'UTF8') in data) > 0" : `x::text LIKE '%' || $1 || '%'`;
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${name}" x WHERE ${where}`, [token]);
      if (rows[0]!.n) found.push(`table ${name}`);
    }
  } finally {
    await pool.end();
  }
  return found;
}

test('after DELETE /inboxes/{id} and a clean stop, no byte of its mail remains under data_dir (or in any row)', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-deletion-'));
  try {
    const t = await startTestServer(OPTIONS, { dataDir });
    const doomed = (await t.api('POST', '/inboxes', { address: 'doomed' })).body;
    const kept = (await t.api('POST', '/inboxes', { address: 'kept' })).body;

    const body = unique('inbound-body');
    const attachment = unique('attachment-bytes');
    const sent = unique('sent-body');
    const control = unique('kept-body');
    await deliverMail(t.server.smtpPort, {
      from: 'sender@example.org',
      to: doomed.address,
      subject: 'secret',
      text: `${body} in text`,
      html: `<p>${body} in html</p>`,
      attachments: [{ filename: 'notes.txt', content: `${attachment}\n`, contentType: 'text/plain' }],
    });
    await deliverMail(t.server.smtpPort, { from: 'sender@example.org', to: kept.address, subject: 'stays', text: control });
    // A send with an Idempotency-Key: its response (the message, body included) is stored.
    const send = await t.api('POST', `/inboxes/${doomed.id}/messages`, { to: ['someone@example.org'], subject: 'out', bodyText: sent }, { headers: { 'Idempotency-Key': 'send-1' } });
    assert.equal(send.status, 202, send.text);

    // Before: each token is on disk (the events, the raw message, the attachment file).
    for (const token of [body, attachment, sent, control]) assert.notDeepEqual(await placesContaining(dataDir, token), [], `${token} stored`);

    assert.equal((await t.api('DELETE', `/inboxes/${doomed.id}`)).status, 204);
    await t.close();

    for (const token of [body, attachment, sent]) assert.deepEqual(await placesContaining(dataDir, token), [], `no trace of ${token}`);
    assert.notDeepEqual(await placesContaining(dataDir, control), [], 'the other inbox keeps its mail');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('DELETE /messages/{id} removes the events that copied it; repeating its send is refused, not sent again', async () => {
  const t = await startTestServer(OPTIONS);
  try {
    const inbox = (await t.api('POST', '/inboxes', { address: 'sender' })).body;
    const request = { to: ['someone@example.org'], subject: 'once', bodyText: unique('once') };
    const headers = { 'Idempotency-Key': 'send-once' };
    const sent = await t.api('POST', `/inboxes/${inbox.id}/messages`, request, { headers });
    assert.equal(sent.status, 202, sent.text);
    const eventsOf = async (): Promise<number> => (await sqlDb(t.server.ctx).select({ n: count() }).from(events).where(eq(events.messageId, sent.body.id)).get())!.n;
    // dry-run: message.sent is recorded when the job runs.
    await until('the send recorded an event about the message', async () => ((await eventsOf()) > 0 ? true : undefined));

    assert.equal((await t.api('DELETE', `/messages/${sent.body.id}`)).status, 204);
    assert.equal(await eventsOf(), 0);
    const again = await t.api('POST', `/inboxes/${inbox.id}/messages`, request, { headers });
    expectError(again, 409, 'IDEMPOTENCY_KEY_REUSED');
    assert.match(again.body.error.message, /deleted/);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages`)).body.total, 0, 'nothing sent again');
  } finally {
    await t.close();
  }
});

test('events and webhook delivery logs older than their retention are swept; newer ones stay', async () => {
  let offset = 0;
  const t = await startTestServer({ ...OPTIONS, retention: { events: '10d', delivery_logs: '2d' } }, { clock: { now: () => new Date(Date.now() + offset) } });
  try {
    // The server's own housekeeping sweeps a second after start (then hourly): stopped, so that
    // it cannot sweep at the moved clock before the sweeps below and take what they count.
    await t.server.services.find((s) => s.name === 'housekeeping')!.stop(0);
    const inbox = (await t.api('POST', '/inboxes', { address: 'old' })).body;
    await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'old', text: 'old' });
    const db = sqlDb(t.server.ctx);
    await db
      .insert(webhookAttempts)
      .values({ id: 'dlv_old', accountId: t.accountId, webhookId: 'whk_x', eventId: 'evt_x', eventType: 'message.received', status: 'success', attempt: 1, createdAt: new Date().toISOString() })
      .run();
    offset = 3 * 86_400_000;
    await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'new', text: 'new' });
    const eventCount = async (): Promise<number> => (await db.select({ n: count() }).from(events).get())!.n;
    const attemptCount = async (): Promise<number> => (await db.select({ n: count() }).from(webhookAttempts).get())!.n;
    assert.deepEqual(await sweepEvents(t.server.ctx), { events: 0, deliveryLogs: 1 }, 'a 3-day-old delivery log goes, 3-day-old events stay');
    assert.equal(await eventCount(), 2);
    offset = 11 * 86_400_000;
    assert.deepEqual(await sweepEvents(t.server.ctx), { events: 1, deliveryLogs: 0 }, 'the 11-day-old event goes, the 8-day-old one stays');
    assert.equal(await eventCount(), 1);
    assert.equal(await attemptCount(), 0);
  } finally {
    await t.close();
  }
});

test('retention.events below the 7 days GET /events promises is refused at start', () => {
  assert.throws(
    () => configFrom({ retention: { events: '6d' } }),
    (err: Error) => err instanceof ConfigError && /retention\.events.*at least 7d/.test(err.message),
  );
  assert.equal(configFrom({ retention: { events: '7d' } }).retention.events, 7 * 86_400_000);
});
