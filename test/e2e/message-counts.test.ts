// List totals come from per-inbox, per-status counts kept by triggers (inbox_message_counts):
// they must match the rows through delivery, status changes (a dry-run send going queued →
// sent), message deletion and inbox deletion, whichever path wrote the rows.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { type Transporter } from 'nodemailer';
import { rawRows } from '../../src/store/store.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { smtpTransport } from '../support/mail.ts';

let t: TestServer;
let transport: Transporter;

before(async () => {
  t = await startTestServer();
  transport = smtpTransport(t.server.smtpPort);
});

after(async () => {
  transport?.close();
  await t?.close();
});

const total = async (inboxId: string, status?: string) => {
  const res = await t.api('GET', `/inboxes/${inboxId}/messages?limit=1${status ? `&status=${status}` : ''}`);
  assert.equal(res.status, 200, res.text);
  return res.body.total as number;
};

/** The counts table agrees with COUNT(*) over the rows, for every inbox and status. */
async function assertCountsMatchRows(): Promise<void> {
  const db = t.server.ctx.db;
  const counted = await rawRows(db, 'SELECT inbox_id, status, count(*) AS n FROM messages GROUP BY inbox_id, status ORDER BY 1, 2');
  // Summed over the slots PostgreSQL splits a count into (migrations/pg/0022_counter_slots.sql).
  const kept = await rawRows(db, 'SELECT inbox_id, status, sum(n) AS n FROM inbox_message_counts GROUP BY inbox_id, status HAVING sum(n) <> 0 ORDER BY 1, 2');
  assert.deepEqual(kept, counted);
}

test('totals follow delivery, sending, status changes and deletion', async () => {
  const inbox = (await t.api('POST', '/inboxes', { address: 'counted' })).body;
  const other = (await t.api('POST', '/inboxes', { address: 'other' })).body;
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const info = await transport.sendMail({ from: 'bob@example.org', to: 'counted@agents.test', subject: `m${i}`, text: 'hi' });
    ids.push(/stored as (msg_\w+)/.exec(info.response ?? '')![1]);
  }
  await transport.sendMail({ from: 'bob@example.org', to: 'other@agents.test', subject: 'o', text: 'hi' });
  assert.equal(await total(inbox.id), 3);
  assert.equal(await total(inbox.id, 'received'), 3);
  assert.equal(await total(inbox.id, 'sent'), 0);
  assert.equal(await total(other.id), 1);

  // A dry-run send is stored queued, then its status changes: the per-status totals move.
  const sent = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['someone@example.org'], subject: 'out', bodyText: 'x' });
  assert.equal(sent.status, 202, sent.text);
  // 'sending' is visible between the claim and the outcome: wait for the outcome itself.
  await until('the send to finish', async () => (!['queued', 'sending'].includes((await t.api('GET', `/messages/${sent.body.id}`)).body.status) ? true : undefined));
  const finalStatus = (await t.api('GET', `/messages/${sent.body.id}`)).body.status as string;
  assert.notEqual(finalStatus, 'queued');
  assert.equal(await total(inbox.id), 4);
  assert.equal(await total(inbox.id, 'queued'), 0);
  assert.equal(await total(inbox.id, finalStatus), 1);
  await assertCountsMatchRows();

  assert.equal((await t.api('DELETE', `/messages/${ids[0]}`)).status, 204);
  assert.equal(await total(inbox.id), 3);
  assert.equal(await total(inbox.id, 'received'), 2);
  await assertCountsMatchRows();

  // Deleting the inbox removes its messages by cascade; its counts go with it.
  assert.equal((await t.api('DELETE', `/inboxes/${inbox.id}`)).status, 204);
  const [[left]] = await rawRows<[number]>(t.server.ctx.db, 'SELECT count(*) AS n FROM inbox_message_counts WHERE inbox_id = ?', [inbox.id]);
  assert.equal(left, 0);
  assert.equal(await total(other.id), 1);
  await assertCountsMatchRows();
});
