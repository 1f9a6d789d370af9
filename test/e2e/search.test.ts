// Search (`q`) over real sockets: mail received over SMTP and sent through the API, found by
// words (prefixes, accents folded), phrases, from:/to:/cc:/subject:, label:, is:, has:, in:,
// before:/after:, negation and OR, per inbox and account-wide, on message and thread lists; the
// index follows deletes; relevance before recency; INVALID_QUERY with position and expectation.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { SendMailOptions, Transporter } from 'nodemailer';
import { smtpTransport } from '../support/mail.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let transport: Transporter;
let x: { id: string; address: string };
let y: { id: string; address: string };
const m: Record<string, any> = {};

async function receive(mail: SendMailOptions): Promise<any> {
  const info = await transport.sendMail({ from: 'zed@example.org', text: 'nothing to see', ...mail });
  return (await t.api('GET', `/messages/${/stored as (msg_\w+)/.exec(info.response ?? '')![1]}`)).body;
}

before(async () => {
  t = await startTestServer();
  transport = smtpTransport(t.server.smtpPort);
  x = (await t.api('POST', '/inboxes', { address: 'search-x' })).body;
  y = (await t.api('POST', '/inboxes', { address: 'search-y' })).body;
  m.invoice = await receive({
    from: 'Alice Accounts <alice@billing.example>',
    to: x.address,
    subject: 'Invoice 2024-17 for March',
    text: 'Please pay the invoice by Friday.',
    attachments: [{ filename: 'inv.pdf', content: 'x' }],
  });
  m.resume = await receive({ from: 'bob@jobs.example', to: x.address, cc: 'carol@jobs.example', subject: 'Résumé attached', text: 'My résumé for the position of quarterly reviewer.' });
  m.quarterly = await receive({ from: 'carol@jobs.example', to: x.address, subject: 'quarterly report', text: 'The quarterly report is ready. Quarterly numbers look good, quarterly again.' });
  m.other = await receive({ from: 'alice@billing.example', to: y.address, subject: 'Invoice for y', text: 'Another invoice, pay soon.' });
  m.sent = (await t.api('POST', `/inboxes/${x.id}/messages`, { to: ['dave@client.example'], subject: 'Invoice question', bodyText: 'Is the invoice paid?' })).body;
  await t.api('PATCH', `/messages/${m.resume.id}`, { unread: false, addLabels: ['hiring'] });
});

after(async () => {
  transport?.close();
  await t?.close();
});

const ids = (res: any) => res.body.data.map((d: any) => d.id);
const inX = (q: string) => t.api('GET', `/inboxes/${x.id}/messages?q=${encodeURIComponent(q)}`);
const all = (q: string) => t.api('GET', `/messages?q=${encodeURIComponent(q)}`);
const same = (a: string[], b: string[]) => assert.deepEqual([...a].sort(), [...b].sort());

/** Each query is 400 INVALID_QUERY naming its position and what was expected, on message and thread lists. */
async function refused(cases: ReadonlyArray<readonly [q: string, pos: number, expected: string]>) {
  for (const [q, pos, expected] of cases) {
    for (const path of [`/inboxes/${x.id}/messages`, '/messages', '/threads']) {
      const res = await t.api('GET', `${path}?q=${encodeURIComponent(q)}`);
      expectError(res, 400, 'INVALID_QUERY');
      assert.ok(res.body.error.message.includes(`position ${pos}:`), `${q}: ${res.body.error.message}`);
      assert.ok(res.body.error.message.includes(expected), `${q}: ${res.body.error.message}`);
    }
  }
}

describe('q', () => {
  test('words: all must match, as word prefixes, accents folded, case-insensitive', async () => {
    same(ids(await inX('invoice')), [m.invoice.id, m.sent.id]);
    same(ids(await all('invoice')), [m.invoice.id, m.sent.id, m.other.id]);
    same(ids(await inX('invoice friday')), [m.invoice.id]);
    same(ids(await inX('INVO')), [m.invoice.id, m.sent.id]);
    same(ids(await inX('resume')), [m.resume.id]);
    same(ids(await inX('résumé position')), [m.resume.id]);
    assert.deepEqual(ids(await inX('nonexistentword')), []);
    const res = await inX('invoice');
    assert.equal(res.body.total, 2);
    assert.equal(res.body.limit, 20);
  });

  test('phrases match exactly; -term excludes', async () => {
    same(ids(await inX('"quarterly report"')), [m.quarterly.id]);
    same(ids(await inX('quarterly')), [m.resume.id, m.quarterly.id]);
    same(ids(await inX('quarterly -report')), [m.resume.id]);
    same(ids(await inX('invoice -"pay the invoice"')), [m.sent.id]);
    same(ids(await inX('-invoice')), [m.resume.id, m.quarterly.id]);
  });

  test('from:, to:, cc:, subject:', async () => {
    same(ids(await all('from:alice')), [m.invoice.id, m.other.id]);
    same(ids(await all('from:"Alice Accounts"')), [m.invoice.id]);
    same(ids(await all('from:accounts')), [m.invoice.id]);
    same(ids(await all('from:alice@billing.example')), [m.invoice.id, m.other.id]);
    same(ids(await all('to:dave@client.example')), [m.sent.id]);
    same(ids(await all('to:carol')), [m.resume.id]);
    same(ids(await all('cc:carol')), [m.resume.id]);
    same(ids(await all('subject:invoice -from:alice')), [m.sent.id]);
    same(ids(await inX('subject:quarterly')), [m.quarterly.id]);
  });

  test('label:, is:, has:attachment, in:, before:/after:', async () => {
    same(ids(await all('label:hiring')), [m.resume.id]);
    same(ids(await all('-label:hiring in:inbound')), [m.invoice.id, m.quarterly.id, m.other.id]);
    same(ids(await inX('is:read')), [m.resume.id, m.sent.id]);
    same(ids(await inX('is:unread')), [m.invoice.id, m.quarterly.id]);
    same(ids(await all('has:attachment')), [m.invoice.id]);
    same(ids(await all('invoice -has:attachment')), [m.other.id, m.sent.id]);
    same(ids(await all('in:outbound')), [m.sent.id]);
    const today = new Date().toISOString().slice(0, 10);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    assert.equal((await all(`after:${today}`)).body.total, 5);
    assert.equal((await all(`before:${today}`)).body.total, 0);
    assert.equal((await all(`before:${tomorrow} invoice`)).body.total, 3);
    assert.equal((await all(`after:${tomorrow}`)).body.total, 0);
  });

  test('with words, the best match comes first, then the newest', async () => {
    // "quarterly" four times in one message, once in the other.
    assert.deepEqual(ids(await inX('quarterly')), [m.quarterly.id, m.resume.id]);
    // Without words: newest first.
    assert.deepEqual(ids(await inX('in:inbound')), [m.quarterly.id, m.resume.id, m.invoice.id]);
  });

  test('combines with the other filters and with thread lists', async () => {
    same(ids(await t.api('GET', `/messages?q=invoice&direction=inbound`)), [m.invoice.id, m.other.id]);
    same(ids(await t.api('GET', `/messages?q=quarterly&label=hiring`)), [m.resume.id]);
    same(ids(await t.api('GET', `/threads?q=invoice`)), [m.invoice.threadId, m.other.threadId, m.sent.threadId]);
    same(ids(await t.api('GET', `/inboxes/${x.id}/threads?q=${encodeURIComponent('from:carol')}`)), [m.quarterly.threadId]);
    assert.equal((await t.api('GET', `/threads?q=invoice&limit=1`)).body.total, 3);
  });

  test('a deleted message leaves the index', async () => {
    const gone = await receive({ to: y.address, subject: 'ephemeral zebra' });
    same(ids(await all('zebra')), [gone.id]);
    assert.equal((await t.api('DELETE', `/messages/${gone.id}`)).status, 204);
    assert.deepEqual(ids(await all('zebra')), []);
  });

  test('filename: and plain words match attachment filenames (word prefixes, accents folded), received and sent', async () => {
    const report = await receive({ to: x.address, subject: 'numbers', text: 'see the file', attachments: [{ filename: 'Quartalsbericht-Q3_Résumé.xlsx', content: 'x' }] });
    const fd = new FormData();
    fd.append('file', new Blob(['c']), 'Contract-2024 signed.docx');
    const upload = await (await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: fd })).json();
    const sent = (await t.api('POST', `/inboxes/${x.id}/messages`, { to: ['erin@client.example'], subject: 'paperwork', bodyText: 'attached', attachmentIds: [upload.id] })).body;
    same(ids(await all('filename:quartalsbericht')), [report.id]);
    same(ids(await all('filename:QUARTALS')), [report.id]);
    same(ids(await all('filename:resume')), [report.id]);
    same(ids(await all('filename:"q3 résumé"')), [report.id]);
    same(ids(await all('filename:bericht')), []);
    same(ids(await all('filename:inv')), [m.invoice.id]);
    same(ids(await all('filename:pdf')), [m.invoice.id]);
    same(ids(await all('filename:contract')), [sent.id]);
    same(ids(await all('filename:xlsx -filename:contract')), [report.id]);
    same(ids(await all('-filename:xlsx has:attachment')), [m.invoice.id, sent.id]);
    // Plain words: in the text or in a filename, each word on its own.
    same(ids(await all('quartalsbericht')), [report.id]);
    same(ids(await all('quartalsbericht numbers')), [report.id]);
    same(ids(await all('quartalsbericht invoice')), []);
    same(ids(await all('contract paperwork')), [sent.id]);
    same(ids(await all('contract -paperwork')), []);
    same(ids(await all('see -quartalsbericht')), []);
    same(ids(await all('signed from:search-x')), [sent.id]);
    same(ids(await all('signed from:alice')), []);
    // Text matches rank before filename-only matches, even older ones.
    const inText = await receive({ to: y.address, subject: 'the ledger', text: 'ledger attached soon' });
    const inFile = await receive({ to: y.address, subject: 'numbers again', attachments: [{ filename: 'ledger.csv', content: 'a,b' }] });
    assert.deepEqual(ids(await all('ledger')), [inText.id, inFile.id]);
    same(ids(await t.api('GET', `/threads?q=${encodeURIComponent('filename:contract')}`)), [sent.threadId]);
    same(ids(await t.api('GET', `/inboxes/${x.id}/threads?q=quartalsbericht`)), [report.threadId]);
    assert.equal((await t.api('GET', `/messages?q=${encodeURIComponent('quartalsbericht')}&limit=1`)).body.total, 1);
    expectError(await all('filename:'), 400, 'INVALID_QUERY');
    expectError(await all('filename:"!!"'), 400, 'INVALID_QUERY');
    for (const gone of [report.id, sent.id, inText.id, inFile.id]) assert.equal((await t.api('DELETE', `/messages/${gone}`)).status, 204);
  });

  test('another account finds nothing', async () => {
    const other = await t.newAccount('other');
    const res = await t.api('GET', '/messages?q=invoice', undefined, { key: other.key });
    assert.deepEqual(res.body, { data: [], total: 0, totalIsLowerBound: false, limit: 20, offset: 0 });
  });

  test('bad syntax: 400 INVALID_QUERY with the position and what was expected', async () => {
    await refused([
      ['invoice "unclosed', 18, 'closing'],
      ['is:maybe', 4, '`unread` or `read`'],
      ['has:pdf', 5, '`attachment`'],
      ['in:spam', 4, '`inbound` or `outbound`'],
      ['before:2024-13-01', 8, 'YYYY-MM-DD'],
      ['after:yesterday', 7, 'YYYY-MM-DD'],
      ['label:Bad!', 7, 'a label'],
      ['invoice -', 10, 'a term after `-`'],
      ['from: alice', 6, 'a value after `from:`'],
      ['   ', 1, 'a search term'],
      ['* ^', 1, 'a search term'],
      ['"!!"', 1, 'letters or digits'],
    ]);
    expectError(await t.api('GET', `/messages?q=${'a'.repeat(1001)}`), 400, 'INVALID_QUERY');
    // Quotes, parentheses and FTS5 operators in words are just text.
    assert.equal((await all('NEAR(invoice) * ^')).status, 200);
    assert.equal((await all("o'brien AND (xy)")).status, 200);
  });
});

describe('q with OR (Gmail: one side must match; OR binds tighter than the implicit AND)', () => {
  test('words, prefixes, phrases, from:, to:, cc:, subject:, mixed with the other terms', async () => {
    same(ids(await inX('résumé OR friday')), [m.resume.id, m.invoice.id]);
    same(ids(await inX('résu OR fri')), [m.resume.id, m.invoice.id]);
    same(ids(await inX('quart OR fri')), [m.resume.id, m.quarterly.id, m.invoice.id]);
    same(ids(await inX('"quarterly report" OR "pay the invoice"')), [m.quarterly.id, m.invoice.id]);
    same(ids(await inX('"quarterly report" OR "the invoice by"')), [m.quarterly.id, m.invoice.id]);
    same(ids(await inX('from:bob OR from:alice')), [m.resume.id, m.invoice.id]);
    same(ids(await all('from:bob OR from:alice')), [m.resume.id, m.invoice.id, m.other.id]);
    same(ids(await all('to:dave OR cc:carol')), [m.sent.id, m.resume.id]);
    same(ids(await inX('cc:carol OR from:alice')), [m.resume.id, m.invoice.id]);
    same(ids(await inX('subject:résumé OR from:alice OR zzunknown')), [m.resume.id, m.invoice.id]);
    // x a OR b = x and (a or b)
    same(ids(await inX('invoice friday OR question')), [m.invoice.id, m.sent.id]);
    same(ids(await all('invoice friday OR question')), [m.invoice.id, m.sent.id]);
    same(ids(await inX('friday OR question invoice')), [m.invoice.id, m.sent.id]);
    same(ids(await inX('invoice OR résumé -friday')), [m.resume.id, m.sent.id]);
    same(ids(await inX('invoice OR résumé is:unread')), [m.invoice.id]);
    same(ids(await inX('from:alice OR résumé quarterly')), [m.resume.id]);
    // A plain word on one side matches attachment filenames too (inv.pdf).
    same(ids(await inX('pdf OR résumé')), [m.invoice.id, m.resume.id]);
    same(ids(await inX('pdf OR from:bob')), [m.invoice.id, m.resume.id]);
    same(ids(await inX('pdf from:bob OR from:alice')), [m.invoice.id]);
    same(ids(await all('pdf OR résumé from:bob OR from:alice')), [m.invoice.id, m.resume.id]);
    // Lower-case `or` is a word; an OR side repeated counts once.
    assert.deepEqual(ids(await inX('résumé or friday')), []);
    same(ids(await inX('friday OR friday')), [m.invoice.id]);
    // Counts and thread lists follow.
    const res = await inX('from:bob OR from:alice');
    assert.deepEqual([res.body.total, res.body.totalIsLowerBound], [2, false]);
    same(ids(await t.api('GET', `/inboxes/${x.id}/threads?q=${encodeURIComponent('from:bob OR subject:quarterly')}`)), [m.resume.threadId, m.quarterly.threadId]);
    // The best match first: "quarterly" four times in one message.
    assert.equal(ids(await inX('quarterly OR zzunknown'))[0], m.quarterly.id);
  });

  test('conditions: label:, is:, has:, in:, before:/after: on both sides', async () => {
    same(ids(await inX('label:hiring OR in:outbound')), [m.resume.id, m.sent.id]);
    same(ids(await inX('invoice label:hiring OR in:outbound')), [m.sent.id]);
    same(ids(await all('has:attachment OR label:hiring')), [m.invoice.id, m.resume.id]);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    same(ids(await inX(`before:2000-01-01 OR after:${tomorrow}`)), []);
    same(ids(await inX(`before:2000-01-01 OR before:${tomorrow} from:carol`)), [m.quarterly.id]);
  });

  test('refused with 400 INVALID_QUERY: a dangling OR, a negated side, filename:, text OR a condition', async () => {
    await refused([
      ['OR invoice', 1, 'a search term before `OR`'],
      ['invoice OR', 11, 'a search term after `OR`'],
      ['invoice OR ', 12, 'a search term after `OR`'],
      ['invoice OR OR friday', 12, 'a search term after `OR`'],
      ['-invoice OR friday', 1, 'not negated'],
      ['invoice OR -from:alice', 12, 'not negated'],
      ['filename:pdf OR invoice', 1, 'on either side of `OR`'],
      ['invoice OR label:hiring', 12, 'not both'],
      ['is:read OR from:bob', 12, 'not both'],
      ['invoice OR ...', 12, 'letters or digits'],
      ['invoice OR i', 12, 'at least 2 characters'],
    ]);
    // Quoted or negated, OR is a word.
    assert.equal((await inX('invoice "OR" friday')).status, 200);
    assert.equal((await inX('invoice -OR')).status, 200);
  });

  test('{a b c} is a OR b OR c; parentheses around a side of OR with other terms are refused, not read as grouping', async () => {
    same(ids(await inX('{résumé friday}')), [m.resume.id, m.invoice.id]);
    same(ids(await inX('invoice {friday question}')), [m.invoice.id, m.sent.id]);
    same(ids(await all('{from:bob from:alice} -subject:"for y"')), [m.resume.id, m.invoice.id]);
    same(ids(await inX('{"quarterly report" "pay the invoice"}')), [m.quarterly.id, m.invoice.id]);
    same(ids(await inX('{label:hiring in:outbound}')), [m.resume.id, m.sent.id]);
    same(ids(await inX('résumé OR {friday question}')), [m.resume.id, m.invoice.id, m.sent.id]);
    same(ids(await inX('{friday}')), [m.invoice.id]);
    // Parentheses around one side alone, or around the whole OR, are harmless punctuation.
    same(ids(await inX('invoice (friday OR question)')), [m.invoice.id, m.sent.id]);
    same(ids(await inX('(résumé) OR (friday)')), [m.resume.id, m.invoice.id]);
    await refused([
      ['{friday', 8, 'a closing `}`'],
      ['invoice {}', 10, 'a search term in `{…}`'],
      ['{friday {question}}', 9, 'braces do not nest'],
      ['-{friday question}', 2, '`-{…}` is not supported'],
      ['{friday -question}', 9, 'not negated'],
      ['(invoice friday) OR question', 16, 'not in parentheses'],
      ['question OR (invoice friday)', 13, 'not in parentheses'],
    ]);
  });
});
