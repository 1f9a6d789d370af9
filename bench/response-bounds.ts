// Issue 27, "Lists carry whole bodies" and "labels on a large thread": the cost of one list page
// of 20 mails of 14 MB (GET /inboxes/{id}/messages), of GET /threads/{id} and of PATCH
// /threads/{id} with 50 labels on a 2,001-message thread, with the server in this process
// (RSS is the process's). Run: node bench/response-bounds.ts [lists|thread]
// (both when none is named; PostgreSQL: MAILROOM_TEST_ENGINE=postgres). Figures: docs/performance.md "Response bounds".
import { smtpTransport } from '../test/support/mail.ts';
import { startTestServer } from '../test/support/server.ts';

const BIG = 14 * 1024 * 1024;
const MAILS = 20;
const THREAD = 2001;
const LABELS = 50;
const only = process.argv[2];

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

/** Runs one request; prints its status, size, time, the longest the event loop was held meanwhile and RSS. */
async function timed(what: string, run: () => Promise<{ status: number; text: string }>): Promise<void> {
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  let last = performance.now();
  let held = 0;
  // A 1 ms timer: the longest gap between two of its runs is the longest the loop was held.
  const tick = setInterval(() => {
    const now = performance.now();
    held = Math.max(held, now - last);
    last = now;
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 1);
  const t0 = performance.now();
  const res = await run();
  const ms = performance.now() - t0;
  clearInterval(tick);
  held = Math.max(held, performance.now() - last);
  peak = Math.max(peak, process.memoryUsage().rss);
  const error = res.status >= 400 ? ' ' + res.text.slice(0, 120) : '';
  console.log(`${what}: ${res.status}, ${mb(res.text.length)} answer, ${Math.round(ms)} ms, loop held ${Math.round(held)} ms at most, RSS ${mb(rss0)} → peak ${mb(peak)}${error}`);
}

const t = await startTestServer({ smtp: { max_message_bytes: 32 * 1024 * 1024, max_connections_per_ip: 1000 }, limits: { requests_per_minute: 100_000 } });
const transport = smtpTransport(t.server.smtpPort);
try {
  if (only !== 'thread') {
    const big = (await t.api('POST', '/inboxes', { address: 'big' })).body;
    const body = 'The quick brown fox jumps over the lazy dog.\n'.repeat(Math.ceil(BIG / 45)).slice(0, BIG);
    for (let i = 0; i < MAILS; i++) await transport.sendMail({ from: 'x@example.org', to: big.address, subject: `big ${i}`, text: body });
    global.gc?.();
    for (let i = 0; i < 3; i++) await timed(`GET /inboxes/{id}/messages, ${MAILS} × 14 MB`, () => t.api('GET', `/inboxes/${big.id}/messages?limit=${MAILS}`));
  }
  if (only !== 'lists') {
    const inbox = (await t.api('POST', '/inboxes', { address: 'long' })).body;
    const first = await transport.sendMail({ from: 'x@example.org', to: inbox.address, subject: 'long', text: 'start', messageId: '<m0@example.org>' });
    const msgId = /stored as (\S+)/.exec(first.response)![1];
    const threadId = (await t.api('GET', `/messages/${msgId}`)).body.threadId;
    for (let i = 1; i < THREAD; i++) {
      await transport.sendMail({ from: 'x@example.org', to: inbox.address, subject: 'Re: long', text: `reply ${i} `.repeat(600), inReplyTo: '<m0@example.org>', references: '<m0@example.org>' });
    }
    await timed(`GET /threads/{id}, ${THREAD} messages`, () => t.api('GET', `/threads/${threadId}`));
    const labels = Array.from({ length: LABELS }, (_, i) => `label-${i}`);
    for (let i = 0; i < 2; i++) {
      await timed(`PATCH /threads/{id} +${LABELS} labels, ${THREAD} messages`, () => t.api('PATCH', `/threads/${threadId}`, { addLabels: labels, unread: false }));
      await timed(`PATCH /threads/{id} −${LABELS} labels`, () => t.api('PATCH', `/threads/${threadId}`, { removeLabels: labels, unread: true }));
    }
  }
} finally {
  transport.close();
  await t.close();
}
