// SMTP sessions the way real MTAs run them, over raw sockets against the real listener: a
// pipelined "." + QUIT followed by a half-close (Exim), redelivery of a message whose reply was
// lost, two sessions delivering the same message at once, and the greeting. Each case checks
// what is stored (messages and message.received events), not only the replies.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { and, count, eq } from 'drizzle-orm';
import { events, messages } from '../../src/store/schema.ts';
import { INBOUND_JOB } from '../../src/domain/inbound/spool.ts';
import { listJobs } from '../../src/jobs/table.ts';
import { SmtpClient, type SmtpReply } from '../support/smtp-client.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { sqlDb } from '../support/db.ts';

let t: TestServer;
let spooling: TestServer;
let inboxId: string;
let spoolInboxId: string;
let otherInboxId: string;

before(async () => {
  [t, spooling] = await Promise.all([startTestServer(), startTestServer({ smtp: { inline_processing: 0 } })]);
  const a = await t.api('POST', '/inboxes', { address: 'relay' });
  const b = await spooling.api('POST', '/inboxes', { address: 'relay' });
  const c = await t.api('POST', '/inboxes', { address: 'other' });
  assert.equal(a.status, 201);
  assert.equal(b.status, 201);
  assert.equal(c.status, 201);
  inboxId = a.body.id;
  spoolInboxId = b.body.id;
  otherInboxId = c.body.id;
});
after(async () => {
  await Promise.all([t?.close(), spooling?.close()]);
});

/** A reply, or code 0 when the connection closed first. */
const orClosed = (client: SmtpClient, p: Promise<SmtpReply>) => Promise.race([p, client.closed.then(() => ({ code: 0, text: 'closed' }))]);

async function stored(s: TestServer, inbox: string, messageIdHeader: string): Promise<number> {
  return (await sqlDb(s.server.ctx)
    .select({ n: count() })
    .from(messages)
    .where(and(eq(messages.inboxId, inbox), eq(messages.messageIdHeader, messageIdHeader)))
    .get())!.n;
}

async function receivedEvents(s: TestServer, subject: string): Promise<number> {
  const rows = await sqlDb(s.server.ctx).select({ data: events.data }).from(events).where(eq(events.type, 'message.received')).all();
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
    assert.equal(await stored(t, inboxId, '<half-close@example.org>'), 1);
    assert.equal(await receivedEvents(t, 'half close'), 1);
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
      await until('both processed', async () => ((await sqlDb(s.server.ctx).select({ n: count() }).from(messages).where(eq(messages.inboxId, inbox)).get())!.n > 0 ? true : undefined));
      // Spooled mail is processed after its 250: both copies' inbound jobs have run.
      await until('spool drained', async () => ((await listJobs(s.server.ctx, ['queued', 'running'])).some((j) => j.kind === INBOUND_JOB) ? undefined : true));
      assert.equal(await stored(s, inbox, msgid), 1);
      assert.equal(await receivedEvents(s, `redelivery ${name}`), 1);
    });
  }

  test('the same Message-ID with other content is a different message and is stored', async () => {
    const client = await session(t);
    for (const body of ['first version', 'second version']) {
      const r = await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(mail('same-id@example.org', 'same id', body)));
      assert.equal(r.code, 250, r.text);
    }
    await client.quit();
    assert.equal(await stored(t, inboxId, '<same-id@example.org>'), 2);
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
    assert.equal(await stored(t, inboxId, '<concurrent@example.org>'), 1);
    assert.equal(await receivedEvents(t, 'concurrent'), 1);
  });
});

/** message.received events for one Message-ID (the event data carries the body too, so no substring match). */
async function receivedFor(s: TestServer, messageIdHeader: string): Promise<number> {
  const rows = await sqlDb(s.server.ctx).select({ data: events.data }).from(events).where(eq(events.type, 'message.received')).all();
  return rows.filter((r) => JSON.parse(String(r.data)).messageIdHeader === messageIdHeader).length;
}

async function inboxCount(s: TestServer, inbox: string): Promise<number> {
  return (await sqlDb(s.server.ctx).select({ n: count() }).from(messages).where(eq(messages.inboxId, inbox)).get())!.n;
}

const storedId = (r: SmtpReply) => /stored as (msg_\S+)/.exec(r.text)?.[1];

/** DATA with `bytes` sent exactly as given (no dot-stuffing), then CRLF.CRLF; the final reply. */
async function rawData(client: SmtpClient, bytes: Buffer): Promise<SmtpReply> {
  const go = await client.cmd('DATA');
  assert.equal(go.code, 354, go.text);
  client.socket.write(Buffer.concat([bytes, Buffer.from('\r\n.\r\n')]));
  return client.read();
}

/** The message and its raw bytes as the API returns them. */
async function fetchStored(id: string): Promise<{ message: any; raw: Buffer }> {
  const m = await t.api('GET', `/messages/${id}`);
  assert.equal(m.status, 200, m.text.slice(0, 200));
  const res = await fetch(`${t.url}/messages/${id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
  assert.equal(res.status, 200);
  return { message: m.body, raw: Buffer.from(await res.arrayBuffer()) };
}

// Transactions as RFC 5321 defines them: RSET (§4.1.1.5) drops the envelope built so far and
// the connection carries on; a connection carries any number of transactions. A server that
// kept a recipient across RSET would deliver the next message to an inbox its sender never
// named; one that mixed up transactions would store a message twice or not at all.
describe('SMTP transactions on one connection', () => {
  test('RSET after MAIL and RCPT drops that envelope: 250, and only the next transaction is delivered', async () => {
    const client = await session(t);
    assert.equal((await client.cmd('MAIL FROM:<first@example.org>')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<other@agents.test>')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<relay@agents.test>')).code, 250);
    const rset = await client.cmd('RSET');
    assert.equal(rset.code, 250, rset.text);
    // Nothing of the old envelope is left to send data to.
    assert.equal((await client.cmd('DATA')).code, 503);
    assert.equal((await client.cmd('MAIL FROM:<second@example.org>')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<relay@agents.test>')).code, 250);
    const r = await client.data(Buffer.from(mail('after-rset@example.org', 'after rset')));
    await client.quit();
    assert.equal(r.code, 250, r.text);
    assert.equal(await stored(t, inboxId, '<after-rset@example.org>'), 1);
    assert.equal(await receivedFor(t, '<after-rset@example.org>'), 1);
    // The recipient named before RSET got nothing, and the envelope sender is the second one.
    assert.equal(await inboxCount(t, otherInboxId), 0);
    const { raw } = await fetchStored(storedId(r)!);
    assert.match(raw.toString('latin1'), /^Return-Path: <second@example\.org>\r\n/);
  });

  for (const [name, server] of [
    ['processed before the reply', () => ({ s: t, inbox: inboxId })],
    ['spooled', () => ({ s: spooling, inbox: spoolInboxId })],
  ] as const) {
    test(`five transactions on one connection: each answered 250 and stored exactly once (${name})`, async () => {
      const { s, inbox } = server();
      const ids = Array.from({ length: 5 }, (_v, i) => `many-${i}-${name.length}@example.org`);
      const client = await session(s);
      const replies: SmtpReply[] = [];
      for (const [i, id] of ids.entries()) replies.push(await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(mail(id, `transaction ${i} ${name}`, `body ${i}`))));
      await client.quit();
      for (const r of replies) assert.equal(r.code, 250, r.text);
      // Five different answers: no transaction was answered with another one's id.
      assert.equal(new Set(replies.map((r) => /(?:stored|queued) as (\S+)/.exec(r.text)?.[1])).size, 5);
      // Spooled mail is processed after its 250.
      await until('all five received', async () => ((await Promise.all(ids.map((id) => receivedFor(s, `<${id}>`)))).every((n) => n >= 1) ? true : undefined));
      for (const id of ids) {
        assert.equal(await stored(s, inbox, `<${id}>`), 1, id);
        assert.equal(await receivedFor(s, `<${id}>`), 1, id);
      }
    });
  }
});

// What the listener does with input at the edges of RFC 5321, asserted exactly so a change of
// behaviour (a new extension, a line limit, a different parser) shows up here: CHUNKING is not
// offered, so BDAT is an unknown command; DATA has no line-length limit (smtp-server's 16 KB
// limit is for command lines only) and keeps NUL bytes; 8BITMIME and SMTPUTF8 (RFC 6152, 6531)
// are offered and their bytes stored as sent; and only CRLF.CRLF ends DATA, so a bare-LF dot
// cannot end a message early and smuggle a second one in after it (the "SMTP smuggling"
// attacks of 2023). hostile-smtp.test.ts sends bare LFs and NULs too, but accepts stored or 5xx
// and never checks what was stored, nor a dot line between bare LFs.
describe('SMTP edge cases', () => {
  test('CHUNKING is not offered: BDAT is answered 500, its chunk is not stored, and the session carries on', async () => {
    const { client } = await SmtpClient.open(t.server.smtpPort);
    const ehlo = await client.cmd('EHLO mta.example.org');
    assert.equal(ehlo.code, 250);
    const extensions = ehlo.text.split(/\r?\n/).slice(1);
    assert.ok(!extensions.some((e) => /^(CHUNKING|BINARYMIME)\b/i.test(e)), ehlo.text);
    assert.equal((await client.cmd('MAIL FROM:<sender@example.org>')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<relay@agents.test>')).code, 250);
    // A client that sends BDAT anyway writes its chunk straight after the command (RFC 3030
    // §2): without CHUNKING every line of it is read as a command, and each must be refused.
    const chunk = `Subject: chunked\r\nMessage-ID: <bdat@example.org>\r\n\r\nchunk body\r\n`;
    client.socket.write(`BDAT ${Buffer.byteLength(chunk)} LAST\r\n${chunk}NOOP\r\n`);
    const bdat = await client.read();
    assert.equal(bdat.code, 500, bdat.text);
    for (const line of chunk.split('\r\n').slice(0, -1)) {
      const r = await client.read();
      assert.equal(r.code, 500, `${JSON.stringify(line)}: ${r.code} ${r.text}`);
    }
    assert.deepEqual(await client.read(), { code: 250, text: 'OK' }, 'the NOOP after the chunk');
    assert.equal((await client.cmd('RSET')).code, 250);
    const r = await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(mail('after-bdat@example.org', 'after bdat')));
    await client.quit();
    assert.equal(r.code, 250, r.text);
    assert.equal(await stored(t, inboxId, '<bdat@example.org>'), 0);
    assert.equal(await receivedFor(t, '<bdat@example.org>'), 0);
    assert.equal(await stored(t, inboxId, '<after-bdat@example.org>'), 1);
  });

  test('a body line of 20,000 characters is stored whole, byte for byte', async () => {
    const long = Array.from({ length: 20_000 }, (_v, i) => String.fromCharCode(0x41 + (i % 26))).join('');
    const client = await session(t);
    const r = await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(mail('long-line@example.org', 'long line', `start\r\n${long}\r\nend`)));
    await client.quit();
    assert.equal(r.code, 250, r.text);
    assert.equal(await stored(t, inboxId, '<long-line@example.org>'), 1);
    const { message, raw } = await fetchStored(storedId(r)!);
    assert.equal(message.bodyText, `start\n${long}\nend`);
    assert.ok(raw.includes(`\r\nstart\r\n${long}\r\nend\r\n`), 'the raw message lost or changed the long line');
  });

  test('NUL bytes in the body: the raw message keeps them, the text shows U+FFFD, and the session carries on', async () => {
    const client = await session(t);
    const r = await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(mail('nul@example.org', 'nul bytes', 'before\0middle\0after')));
    assert.equal(r.code, 250, r.text);
    const next = await client.send('sender@example.org', ['relay@agents.test'], Buffer.from(mail('after-nul@example.org', 'after nul')));
    await client.quit();
    assert.equal(next.code, 250, next.text);
    assert.equal(await stored(t, inboxId, '<nul@example.org>'), 1);
    assert.equal(await stored(t, inboxId, '<after-nul@example.org>'), 1);
    const { message, raw } = await fetchStored(storedId(r)!);
    // Text never holds NUL (PostgreSQL cannot store it): the same replacement on both engines.
    assert.equal(message.bodyText, 'before\uFFFDmiddle\uFFFDafter');
    assert.ok(raw.includes('\r\n\r\nbefore\0middle\0after\r\n'), 'the raw message lost or changed the NUL bytes');
  });

  test('8BITMIME: offered, and an 8-bit UTF-8 body sent with BODY=8BITMIME is stored intact', async () => {
    const client = await session(t);
    const ehlo = await client.cmd('EHLO mta.example.org');
    const extensions = ehlo.text.split(/\r?\n/).slice(1);
    assert.ok(extensions.includes('8BITMIME'), ehlo.text);
    assert.ok(extensions.includes('SMTPUTF8'), ehlo.text);
    const text = 'Pingüino, ñandú, 日本語 and ☃ in 8 bits';
    const body = Buffer.from(
      `From: snd@example.org\r\nTo: relay@agents.test\r\nSubject: eight bit\r\nMessage-ID: <8bit@example.org>\r\nMIME-Version: 1.0\r\n` +
        `Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n${text}\r\n`,
    );
    assert.equal((await client.cmd('MAIL FROM:<snd@example.org> BODY=8BITMIME')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<relay@agents.test>')).code, 250);
    const r = await client.data(body);
    await client.quit();
    assert.equal(r.code, 250, r.text);
    assert.equal(await stored(t, inboxId, '<8bit@example.org>'), 1);
    const { message, raw } = await fetchStored(storedId(r)!);
    assert.equal(message.bodyText, text);
    assert.ok(raw.includes(body), 'the raw message is not the bytes sent');
  });

  test('SMTPUTF8: a UTF-8 envelope sender is accepted and kept as the sender', async () => {
    const client = await session(t);
    const mailFrom = await client.cmd('MAIL FROM:<ñandú@ejemplo.org> SMTPUTF8');
    assert.equal(mailFrom.code, 250, mailFrom.text);
    assert.equal((await client.cmd('RCPT TO:<relay@agents.test>')).code, 250);
    // No From header: the stored sender is the envelope's.
    const r = await client.data(Buffer.from('To: relay@agents.test\r\nSubject: utf8 envelope\r\nMessage-ID: <smtputf8@example.org>\r\n\r\nhola\r\n'));
    // And an internationalised From header (RFC 6532) in the same session.
    assert.equal((await client.cmd('MAIL FROM:<ñandú@ejemplo.org> SMTPUTF8')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<relay@agents.test>')).code, 250);
    const h = await client.data(Buffer.from('From: Ñandú Pérez <pérez@ejemplo.org>\r\nTo: relay@agents.test\r\nSubject: ¿utf8 header?\r\nMessage-ID: <smtputf8-header@example.org>\r\n\r\nhola\r\n'));
    await client.quit();
    assert.equal(r.code, 250, r.text);
    assert.equal(h.code, 250, h.text);
    const list = await t.api('GET', `/inboxes/${inboxId}/messages`);
    assert.equal(list.status, 200);
    const byMsgid = (id: string) => list.body.data.filter((m: any) => m.messageIdHeader === id);
    assert.deepEqual(
      byMsgid('<smtputf8@example.org>').map((m: any) => [m.id, m.fromAddress]),
      [[storedId(r), 'ñandú@ejemplo.org']],
    );
    assert.deepEqual(
      byMsgid('<smtputf8-header@example.org>').map((m: any) => [m.id, m.fromAddress, m.fromName, m.subject]),
      [[storedId(h), 'pérez@ejemplo.org', 'Ñandú Pérez', '¿utf8 header?']],
    );
    // The trace field names the envelope sender as given, not with its non-ASCII letters cut.
    const raw = await (await fetch(`${t.url}/messages/${storedId(r)}/raw`, { headers: { authorization: `Bearer ${t.key}` } })).text();
    assert.match(raw, /^Return-Path: <ñandú@ejemplo\.org>\r\n/);
  });

  for (const [name, dot] of [
    ['LF . LF', '\n.\n'],
    ['LF . CRLF', '\n.\r\n'],
    ['CRLF . LF', '\r\n.\n'],
    ['CR . CRLF', '\r.\r\n'],
  ] as const) {
    test(`a bare "${name}" does not end DATA: no second message is smuggled in after it`, async () => {
      const tag = name.replace(/\W+/g, '-').toLowerCase();
      const smuggled = `<smuggled${tag}@example.org>`;
      const outer = `<carrier${tag}@example.org>`;
      const tail = `MAIL FROM:<evil@example.org>\r\nRCPT TO:<other@agents.test>\r\nDATA\r\n` + `From: evil@example.org\r\nSubject: smuggled ${name}\r\nMessage-ID: ${smuggled}\r\n\r\nsmuggled body`;
      const body = `From: sender@example.org\r\nSubject: carrier ${name}\r\nMessage-ID: ${outer}\r\n\r\nfirst line${dot}${tail}`;
      const client = await session(t);
      assert.equal((await client.cmd('MAIL FROM:<sender@example.org>')).code, 250);
      assert.equal((await client.cmd('RCPT TO:<relay@agents.test>')).code, 250);
      const r = await rawData(client, Buffer.from(body));
      assert.equal(r.code, 250, r.text);
      // The next reply is the NOOP's: no replies to smuggled commands are queued up.
      assert.deepEqual(await client.cmd('NOOP'), { code: 250, text: 'OK' });
      await client.quit();
      assert.equal(await stored(t, inboxId, outer), 1);
      assert.equal(await stored(t, inboxId, smuggled), 0);
      assert.equal(await receivedFor(t, smuggled), 0);
      assert.equal(await inboxCount(t, otherInboxId), 0);
      // It is all one message: the "commands" are its body, byte for byte.
      const { raw } = await fetchStored(storedId(r)!);
      assert.ok(raw.includes(`\r\n\r\nfirst line${dot}${tail}\r\n`), 'the carrier message was cut or changed');
    });
  }
});
