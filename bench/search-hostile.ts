// Hostile searches (issue 27): how long one search holds the server's event loop, measured by
// hand (docs/performance.md "Hostile searches"). A test server (SQLite, or PostgreSQL with
// MAILROOM_TEST_ENGINE=postgres) gets BENCH_HOSTILE_MESSAGES (default 300) mails of 2,000
// pseudo-random words each over SMTP, so two-letter prefixes expand to thousands of words of the
// shared index; then each hostile query runs once while node:perf_hooks' event loop delay
// histogram records the longest stall. Run with the code to compare checked out:
//   node bench/search-hostile.ts
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { smtpTransport } from '../test/support/mail.ts';
import { startTestServer } from '../test/support/server.ts';

const MESSAGES = Number(process.env.BENCH_HOSTILE_MESSAGES ?? 300);

function text(seed: number, n: number): string {
  let x = seed;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let w = '';
    for (let j = 0, len = 2 + (i % 7); j < len; j++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      w += String.fromCharCode(97 + (x % 26));
    }
    out.push(w);
  }
  return out.join(' ');
}

const t = await startTestServer();
const transport = smtpTransport(t.server.smtpPort);
const inbox = (await t.api('POST', '/inboxes', { address: 'corpus' })).body;
for (let i = 0; i < MESSAGES; i++) await transport.sendMail({ from: 'corpus@example.org', to: inbox.address, subject: `corpus ${i}`, text: text(i + 1, 2000) });
transport.close();
// The attacker: a read-only key of another, empty account (the index is shared).
const attacker = await t.newAccount('attacker');

const letters = 'abcdefghijklmnopqrstuvwxyz';
const QUERIES: Record<string, string> = {
  '500 one-letter words': Array.from({ length: 500 }, (_, i) => letters[i % 26]).join(' '),
  '32 two-letter prefixes': Array.from({ length: 32 }, (_, i) => letters[i % 26] + letters[(i * 7 + 3) % 26]).join(' '),
  // Every message matches the first (OR'ed in the filename arm too), the excluded prefixes are walked whole.
  '1 prefix, 31 excluded prefixes': ['corpus', ...Array.from({ length: 31 }, (_, i) => `-${letters[i % 26]}${letters[(i * 5 + 1) % 26]}`)].join(' '),
  '32 two-letter prefixes as from:': Array.from({ length: 32 }, (_, i) => `from:${letters[i % 26]}${letters[(i * 3 + 2) % 26]}`).join(' '),
};
console.log(`engine ${process.env.MAILROOM_TEST_ENGINE ?? 'sqlite'}, ${MESSAGES} messages of 2,000 words`);
async function measure(name: string, path: string) {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  // The histogram's first tick only sets its reference: a stall before it would go unseen.
  await new Promise((resolve) => setTimeout(resolve, 25));
  const started = performance.now();
  const res = await t.api('GET', path, undefined, { key: attacker.key });
  const ms = performance.now() - started;
  h.disable();
  console.log(`${name}: ${res.status} ${res.body?.error?.code ?? ''} in ${Math.round(ms)} ms, longest event loop stall ${Math.round(h.max / 1e6)} ms`);
}
// Warm-up (a search worker starts at the first search), then the machine's noise.
await measure('warm-up search', '/messages?q=corpus');
await measure('baseline GET /inboxes', '/inboxes');
for (const [name, q] of Object.entries(QUERIES)) {
  for (const path of ['/messages', '/threads']) await measure(`${name} on ${path}`, `${path}?q=${encodeURIComponent(q)}`);
}
await t.close();
