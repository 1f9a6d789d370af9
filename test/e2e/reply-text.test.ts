// Message.extractedText / extractedHtml over real sockets: a Gmail reply received over SMTP
// (text and HTML) shows only its new content on GET /messages/{id}, in lists and in threads; a
// message that is not a reply shows its body; a reply sent through the API gets the same; the
// message.received event (kept, replayed to webhooks) carries no extracted fields; hostile
// bodies fall back to the body. Also measures a 100-message list page with and without replies.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { deliverMail, smtpTransport } from '../support/mail.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let inbox: { id: string; address: string };

before(async () => {
  t = await startTestServer();
  inbox = (await t.api('POST', '/inboxes', { address: 'replies-text' })).body;
});
after(async () => {
  await t?.close();
});

const GMAIL_TEXT = 'Sounds good, see you at 3.\n\nAnna\n\nOn Mon, Jan 8, 2024 at 10:15 AM Bob Smith <bob@example.com> wrote:\n\n> Can we meet at 3pm tomorrow?\n>\n> Bob\n';
const GMAIL_HTML =
  '<div dir="ltr">Sounds good, see you at 3.<div><br></div><div>Anna</div></div><br><div class="gmail_quote"><div dir="ltr" class="gmail_attr">On Mon, Jan 8, 2024 at 10:15 AM Bob Smith &lt;<a href="mailto:bob@example.com">bob@example.com</a>&gt; wrote:<br></div><blockquote class="gmail_quote" style="margin:0px 0px 0px 0.8ex;border-left:1px solid rgb(204,204,204);padding-left:1ex"><div dir="ltr">Can we meet at 3pm tomorrow?<br><br>Bob</div></blockquote></div>';

async function receive(mail: Record<string, unknown>): Promise<any> {
  const id = await deliverMail(t.server.smtpPort, { from: 'Anna <anna@example.org>', to: inbox.address, subject: 'Re: meeting', ...mail });
  return (await t.api('GET', `/messages/${id}`)).body;
}

describe('extractedText and extractedHtml', () => {
  test('a reply received over SMTP: only the new content, in get, list and thread', async () => {
    const original = await receive({ subject: 'meeting', text: 'Can we meet at 3pm tomorrow?\n\nBob', messageId: '<orig-1@example.org>' });
    assert.equal(original.inReplyTo, null);
    assert.equal(original.extractedText, original.bodyText, 'not a reply: the body itself');
    assert.equal(original.extractedHtml, original.bodyHtml);
    const reply = await receive({ text: GMAIL_TEXT, html: GMAIL_HTML, inReplyTo: '<orig-1@example.org>', references: '<orig-1@example.org>' });
    assert.equal(reply.extractedText, 'Sounds good, see you at 3.\n\nAnna');
    assert.equal(reply.extractedHtml, '<div dir="ltr">Sounds good, see you at 3.<div><br></div><div>Anna</div></div>');
    assert.equal(reply.bodyText.trim(), GMAIL_TEXT.trim(), 'the body itself is untouched');
    const listed = (await t.api('GET', `/inboxes/${inbox.id}/messages`)).body.data.find((m: any) => m.id === reply.id);
    assert.equal(listed.extractedText, reply.extractedText);
    assert.equal(listed.extractedHtml, reply.extractedHtml);
    const thread = (await t.api('GET', `/threads/${reply.threadId}`)).body;
    assert.deepEqual(
      thread.messages.map((m: any) => m.extractedText),
      [original.bodyText, 'Sounds good, see you at 3.\n\nAnna'],
    );
  });

  test('a reply sent through the API gets the same treatment; text only: extractedHtml is null', async () => {
    const original = await receive({ subject: 'question', text: 'Is it done?' });
    const sent = (await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'Yes, done.\n\n-- \nAgent\n\nOn Mon, Jan 8, 2024 at 10:15 AM anna@example.org wrote:\n> Is it done?\n' })).body;
    const got = (await t.api('GET', `/messages/${sent.id}`)).body;
    assert.equal(got.extractedText, 'Yes, done.');
    assert.equal(got.extractedHtml, null);
  });

  test('event payloads carry the bodies, not the extracted fields', async () => {
    const reply = await receive({ text: GMAIL_TEXT, inReplyTo: '<orig-2@example.org>' });
    const events = (await t.api('GET', `/events?types=message.received&inboxId=${inbox.id}`)).body.data;
    const payload = events.find((e: any) => e.data.id === reply.id)?.data ?? events.find((e: any) => e.data?.message?.id === reply.id)?.data?.message;
    assert.ok(payload, 'the event of the reply');
    assert.equal('extractedText' in payload, false);
    assert.equal('extractedHtml' in payload, false);
    assert.equal(payload.bodyText.trim(), GMAIL_TEXT.trim());
  });

  test('hostile bodies: the body comes back, never an error', async () => {
    const text = 'On ' + 'x '.repeat(30_000) + '\n> ' + '>'.repeat(10_000);
    const html = '<div class="gmail_quote">' + '<div>'.repeat(2000);
    const reply = await receive({ text, html, inReplyTo: '<orig-3@example.org>' });
    assert.equal(typeof reply.extractedText, 'string');
    assert.equal(reply.extractedHtml, reply.bodyHtml, 'nothing but a quotation: the whole body');
  });

  test('a page of 100 replies: each one extracted, on the page and again from memory', async () => {
    const box = (await t.api('POST', '/inboxes', { address: 'replies-page' })).body;
    const transport = smtpTransport(t.server.smtpPort);
    try {
      for (let i = 0; i < 100; i++) {
        await transport.sendMail({ from: 'anna@example.org', to: box.address, subject: `Re: item ${i}`, text: GMAIL_TEXT, html: GMAIL_HTML, inReplyTo: `<p-${i}@example.org>` });
      }
    } finally {
      transport.close();
    }
    // The page's cost is measured in bench/, not here; what a page must hold is checked twice
    // (the second answer comes from the in-memory results).
    for (let round = 0; round < 2; round++) {
      const page = (await t.api('GET', `/inboxes/${box.id}/messages?limit=100`)).body.data;
      assert.equal(page.length, 100);
      for (const m of page) assert.equal(m.extractedText, 'Sounds good, see you at 3.\n\nAnna');
    }
  });
});
