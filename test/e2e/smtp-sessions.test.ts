// SMTP sessions the way real MTAs run them, over raw sockets against the real listener: a
// pipelined "." + QUIT followed by a half-close (Exim), redelivery of a message whose reply was
// lost, two sessions delivering the same message at once, and the greeting. Each case checks
// what is stored (messages and message.received events), not only the replies.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { and, count, eq } from 'drizzle-orm';
import { events, messages } from '../../src/db/schema.ts';
import { SmtpClient, type SmtpReply } from '../support/smtp-client.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

let t: TestServer;
let spooling: TestServer;
let inboxId: string;
let spoolInboxId: string;

before(async () => {
  [t, spooling] = await Promise.all([startTestServer(), startTestServer({ smtp: { inline_processing: 0 } })]);
  const a = await t.api('POST', '/inboxes', { address: 'relay' });
  const b = await spooling.api('POST', '/inboxes', { address: 'relay' });
  assert.equal(a.status, 201);
  assert.equal(b.status, 201);
  inboxId = a.body.id;
  spoolInboxId = b.body.id;
});
after(async () => {
  await Promise.all([t?.close(), spooling?.close()]);
});

/** A reply, or code 0 when the connection closed first. */
const orClosed = (client: SmtpClient, p: Promise<SmtpReply>) => Promise.race([p, client.closed.then(() => ({ code: 0, text: 'closed' }))]);

function stored(s: TestServer, inbox: string, messageIdHeader: string): number {
  return s.server.ctx.db
    .select({ n: count() })
    .from(messages)
    .where(and(eq(messages.inboxId, inbox), eq(messages.messageIdHeader, messageIdHeader)))
    .get()!.n;
}

function receivedEvents(s: TestServer, subject: string): number {
  const rows = s.server.ctx.db.select({ data: events.data }).from(events).where(eq(events.type, 'message.received')).all();
  return rows.filter((r) => String(r.data).includes(subject)).length;
}

function mail(msgid: string, subject: string, body = 'hello'): string {
  return `From: sender@example.org\r\nTo: relay@agents.test\r\nSubject: ${subject}\r\nMessage-ID: <${msgid}>\r\nDate: Tue, 24 Nov 2026 10:00:00 +0000\r\n\r\n${body}\r\n`;
}

async function session(s: TestServer): Promise<SmtpClient> {
  const { client, greeting } = await SmtpClient.open(s.server.smtpPort);
  assert.equal(greeting.code, 220);
  assert.equal((await client.cmd('EHLO mta.example.org')).code, 250);
  return client;
}

describe('SMTP sessions as real MTAs run them', () => {
  test('the greeting names the protocol once', async () => {
    const { client, greeting } = await SmtpClient.open(t.server.smtpPort);
    assert.equal(greeting.text, 'mx.test.localhost ESMTP mailroom');
    await client.quit();
  });

  test('"." pipelined with QUIT and a half-close: 250 then 221, stored once (Exim)', async () => {
    const client = await session(t);
    assert.equal((await client.cmd('MAIL FROM:<sender@example.org>')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<relay@agents.test>')).code, 250);
    assert.equal((await client.cmd('DATA')).code, 354);
    // What Exim writes: the rest of the message, the terminator and QUIT in one go, then FIN.
    client.socket.write(mail('half-close@example.org', 'half close') + '.\r\nQUIT\r\n');
    client.socket.end();
    const data = await orClosed(client, client.read());
    const quit = await orClosed(client, client.read());
    assert.equal(data.code, 250, `the data must be answered before the connection closes, got ${data.text}`);
    assert.match(data.text, /stored as msg_/);
    assert.equal(quit.code, 221);
    await client.closed;
    assert.equal(stored(t, inboxId, '<half-close@example.org>'), 1);
    assert.equal(receivedEvents(t, 'half close'), 1);
  });

  for (const [name, server] of [
    ['processed before the reply', () => ({ s: t, inbox: inboxId })],
    ['spooled', () => ({ s: spooling, inbox: spoolInboxId })],
  ] as const) {
    test(`a redelivered message (same Message-ID, same bytes) is answered 250 and stored once: ${name}`, async () => {
      const { s, inbox } = server();
      const body = mail(`redelivered-${name.length}@example.org`, `redelivery ${name}`);
      const client = await session(s);
      const first = await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(body));
      const second = await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(body));
      assert.equal(first.code, 250, first.text);
      assert.equal(second.code, 250, second.text);
      await client.quit();
      const msgid = `<redelivered-${name.length}@example.org>`;
      await until('both processed', () => (s.server.ctx.db.select({ n: count() }).from(messages).where(eq(messages.inboxId, inbox)).get()!.n > 0 ? true : undefined));
      // Spooled mail is processed after its 250: give both a chance to be stored.
      await until('spool drained', () => (receivedEvents(s, `redelivery ${name}`) >= 1 ? true : undefined));
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(stored(s, inbox, msgid), 1);
      assert.equal(receivedEvents(s, `redelivery ${name}`), 1);
    });
  }

  test('the same Message-ID with other content is a different message and is stored', async () => {
    const client = await session(t);
    for (const body of ['first version', 'second version']) {
      const r = await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(mail('same-id@example.org', 'same id', body)));
      assert.equal(r.code, 250, r.text);
    }
    await client.quit();
    assert.equal(stored(t, inboxId, '<same-id@example.org>'), 2);
  });

  test('two sessions delivering the same message at once store it once', async () => {
    const body = Buffer.from(mail('concurrent@example.org', 'concurrent'));
    const [a, b] = await Promise.all([session(t), session(t)]);
    const replies = await Promise.all([a, b].map((c) => c.send('sender@example.org', ['relay@agents.test'], body)));
    assert.deepEqual(
      replies.map((r) => r.code),
      [250, 250],
    );
    // Both replies name the one stored message.
    assert.equal(/stored as (\S+)/.exec(replies[0].text)?.[1], /stored as (\S+)/.exec(replies[1].text)?.[1]);
    await Promise.all([a.quit(), b.quit()]);
    assert.equal(stored(t, inboxId, '<concurrent@example.org>'), 1);
    assert.equal(receivedEvents(t, 'concurrent'), 1);
  });
});
