// Search past limits.search_matches (set to 5 here): only the newest 5 matches are ranked, the
// older ones follow them newest first, every match stays reachable by paging, and `total` is 5
// with `totalIsLowerBound: true` (docs/api.md "Search at scale"); under the cap nothing changes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { SendMailOptions, Transporter } from 'nodemailer';
import { smtpTransport } from '../support/mail.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const CAP = 5;
let t: TestServer;
let transport: Transporter;
let inbox: { id: string; address: string };
/** Received in this order, oldest first. */
const alpha: string[] = [];
const gamma: string[] = [];
const delta: string[] = [];

async function receive(mail: SendMailOptions): Promise<string> {
  const info = await transport.sendMail({ from: 'zed@example.org', to: inbox.address, ...mail });
  return /stored as (msg_\w+)/.exec(info.response ?? '')![1];
}

before(async () => {
  t = await startTestServer({ limits: { search_matches: CAP } });
  transport = smtpTransport(t.server.smtpPort);
  inbox = (await t.api('POST', '/inboxes', { address: 'search-cap' })).body;
  // Bodies of one length, so relevance follows how often the word occurs. The oldest has the
  // word most often: past the cap it is not ranked. The tenth has it twice: it leads the window.
  for (let i = 0; i < 12; i++) {
    const body = i === 0 ? 'alpha alpha alpha alpha alpha' : i === 9 ? 'alpha alpha two three four' : 'alpha one two three four';
    alpha.push(await receive({ subject: `note ${i}`, text: body }));
  }
  // gamma in the text of five, in an attachment's filename alone of two (the third and sixth).
  for (let i = 0; i < 7; i++) {
    const byFile = i === 2 || i === 5;
    gamma.push(await receive({ subject: `memo ${i}`, text: byFile ? 'see the file' : 'gamma one two', attachments: byFile ? [{ filename: 'gamma-report.pdf', content: 'x' }] : [] }));
  }
  for (let i = 0; i < 2; i++) delta.push(await receive({ subject: `delta ${i}`, text: i ? 'delta delta' : 'delta' }));
});

after(async () => {
  transport?.close();
  await t?.close();
});

/** Every page of a list, `limit` at a time: the ids in order, and each page's envelope. */
async function pages(path: string, limit: number): Promise<{ ids: string[]; envelopes: Array<{ total: number; totalIsLowerBound: boolean }> }> {
  const ids: string[] = [];
  const envelopes = [];
  for (let offset = 0; ; offset += limit) {
    const res = await t.api('GET', `${path}${path.includes('?') ? '&' : '?'}limit=${limit}&offset=${offset}`);
    assert.equal(res.status, 200, res.text);
    envelopes.push({ total: res.body.total, totalIsLowerBound: res.body.totalIsLowerBound });
    ids.push(...res.body.data.map((m: { id: string }) => m.id));
    if (res.body.data.length < limit) return { ids, envelopes };
  }
}

const list = (q: string) => `/inboxes/${inbox.id}/messages?q=${encodeURIComponent(q)}`;
const newestFirst = (ids: string[]) => [...ids].reverse();

describe('search past the cap', () => {
  test('the newest matches are ranked, the older follow newest first, total is the cap and says so', async () => {
    // Window: the 5 newest (alpha[7..11]), the one with the word twice first, then by recency.
    const want = [alpha[9], alpha[11], alpha[10], alpha[8], alpha[7], ...newestFirst(alpha.slice(0, 7))];
    for (const limit of [3, 5, 100]) {
      const got = await pages(list('alpha'), limit);
      assert.deepEqual(got.ids, want, `limit ${limit}`);
      for (const e of got.envelopes) assert.deepEqual(e, { total: CAP, totalIsLowerBound: true });
    }
    // A page starting past the window: the older matches alone.
    const res = await t.api('GET', `${list('alpha')}&limit=2&offset=6`);
    assert.deepEqual(
      res.body.data.map((m: { id: string }) => m.id),
      [alpha[5], alpha[4]],
    );
    assert.equal(res.body.offset, 6);
  });

  test('matches through a filename count among the newest: in the window after the text matches, past it newest first', async () => {
    const got = await pages(list('gamma'), 2);
    assert.deepEqual(got.ids, [gamma[6], gamma[4], gamma[3], gamma[5], gamma[2], gamma[1], gamma[0]]);
    assert.deepEqual(got.envelopes[0], { total: CAP, totalIsLowerBound: true });
  });

  test('the cap applies to the account-wide list and with other filters', async () => {
    const got = await pages(`/messages?q=alpha&unread=true`, 4);
    assert.deepEqual(got.ids, [alpha[9], alpha[11], alpha[10], alpha[8], alpha[7], ...newestFirst(alpha.slice(0, 7))]);
    await t.api('PATCH', `/messages/${alpha[11]}`, { unread: false });
    const unread = await pages(`/messages?q=alpha&unread=true`, 20);
    // alpha[11] read: the window moves one older, to alpha[6..10].
    assert.deepEqual(unread.ids, [alpha[9], alpha[10], alpha[8], alpha[7], alpha[6], ...newestFirst(alpha.slice(0, 6))]);
    await t.api('PATCH', `/messages/${alpha[11]}`, { unread: true });
  });

  test('a search without words is counted up to the cap; its order (newest first) is unchanged', async () => {
    const all = [...alpha, ...gamma, ...delta];
    const got = await pages(list('in:inbound'), 7);
    assert.deepEqual(got.ids, newestFirst(all));
    for (const e of got.envelopes) assert.deepEqual(e, { total: CAP, totalIsLowerBound: true });
    const few = await t.api('GET', list('subject:delta -delta'));
    assert.deepEqual([few.body.total, few.body.totalIsLowerBound], [0, false]);
  });

  test('under the cap: every match ranked, total exact', async () => {
    const res = await t.api('GET', list('delta'));
    assert.deepEqual(
      res.body.data.map((m: { id: string }) => m.id),
      [delta[1], delta[0]],
    );
    assert.deepEqual([res.body.total, res.body.totalIsLowerBound], [2, false]);
    const exact = await t.api('GET', list('"alpha alpha alpha"'));
    assert.deepEqual([exact.body.data.map((m: { id: string }) => m.id), exact.body.total, exact.body.totalIsLowerBound], [[alpha[0]], 1, false]);
  });

  test('lists without q keep their exact total and no flag', async () => {
    const res = await t.api('GET', `/inboxes/${inbox.id}/messages?unread=true`);
    assert.equal(res.body.total, alpha.length + gamma.length + delta.length);
    assert.equal('totalIsLowerBound' in res.body, false);
  });
});
