// Issue 28: what screening costs per inbound message, beside what parsing it already costs on the
// same analysis worker. Each message of the screening corpus (test/fixtures/screening/) is built
// as MIME (nodemailer's composer), parsed as the worker parses it (parseMessage), then screened
// (screenMessage); plus a 60 KB newsletter and a 1 MB HTML message for the large end.
// CPU time on this thread, no I/O. Run: node bench/screening.ts; with --json it
// prints one line {parseMs, screenMs, messages} (the corpus means) for `npm run bench -- screening-cost`.
import { readFileSync } from 'node:fs';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { parseMessage } from '../src/domain/inbound/inbound-parse.ts';
import { screenMessage } from '../src/domain/screening/screen.ts';

const ROUNDS = 5;
const ctx = { ownDomains: ['acme-robotics.com', 'mailroom.localhost'], ownAddresses: ['support@acme-robotics.com'], authentication: { dmarc: 'pass', fromDomain: 'example.net' } };

const entries = ['attacks.jsonl', 'benign.jsonl', 'heldout.jsonl'].flatMap((f) =>
  readFileSync(new URL(`../test/fixtures/screening/${f}`, import.meta.url), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l)),
);
const build = (m: { from: string; subject: string; text?: string; html?: string; attachments?: Array<{ filename: string; text?: string }> }) =>
  new MailComposer({
    from: m.from,
    to: 'support@acme-robotics.com',
    subject: m.subject,
    text: m.text,
    html: m.html,
    attachments: (m.attachments ?? []).map((a) => ({ filename: a.filename, content: a.text ?? 'x' })),
  })
    .compile()
    .build();

const paragraph = '<p>Our spring collection is here: <a href="https://shop.example.com/p/1">new jackets</a>, boots and tents for every trail. Free shipping over $50.</p>';
const raws: Buffer[] = await Promise.all(entries.map(build));
const newsletter = await build({ from: 'news@shop.example.com', subject: 'Spring', html: `<div style="display:none">Spring sale inside</div>${paragraph.repeat(400)}` });
const large = await build({ from: 'news@shop.example.com', subject: 'Large', html: paragraph.repeat(7000) });

const json = process.argv.includes('--json');

async function measure(label: string, list: Buffer[], rounds = ROUNDS): Promise<{ parseMs: number; screenMs: number }> {
  const parsed = await Promise.all(list.map((r) => parseMessage(r)));
  const parseMs: number[] = [];
  const screenMs: number[] = [];
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < list.length; i++) {
      let t0 = performance.now();
      await parseMessage(list[i]);
      parseMs.push(performance.now() - t0);
      t0 = performance.now();
      screenMessage(parsed[i], ctx);
      screenMs.push(performance.now() - t0);
    }
  }
  const stats = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const mean = s.reduce((a, b) => a + b, 0) / s.length;
    return `mean ${mean.toFixed(3)} ms, p50 ${s[Math.floor(s.length / 2)].toFixed(3)}, p99 ${s[Math.floor(s.length * 0.99)].toFixed(3)}`;
  };
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const ratio = sum(screenMs) / sum(parseMs);
  const means = { parseMs: Number((sum(parseMs) / parseMs.length).toFixed(3)), screenMs: Number((sum(screenMs) / screenMs.length).toFixed(3)) };
  if (json) return means;
  console.log(`${label} (${list.length} messages × ${rounds}): parse ${stats(parseMs)}; screen ${stats(screenMs)}; screening adds ${(ratio * 100).toFixed(0)}% to parsing`);
  return means;
}

const corpus = await measure('corpus', raws);
if (json) {
  console.log(JSON.stringify({ ...corpus, messages: raws.length }));
  process.exit(0);
}
await measure(`newsletter ${(newsletter.length / 1024).toFixed(0)} KB`, [newsletter]);
await measure(`large HTML ${(large.length / 1024 / 1024).toFixed(1)} MB`, [large]);
// smtp-source's body, as bench (o) sends it: 10 KB of 79-character lines that are all base64
// characters, each decoding to binary (the worst case for the base64 check, decodedBlocks).
let lines = '';
for (let i = 1; lines.length < 10_240; i++) lines += `${i}${'X'.repeat(78 - String(i).length)}\r\n`;
// A small message: rounds enough for a steady mean (the first few run before V8 optimizes).
await measure('smtp-source body 10 KB', [await build({ from: 'a@example.net', subject: 'load', text: lines })], 2000);
