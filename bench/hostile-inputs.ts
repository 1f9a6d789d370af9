// Hostile inputs to the functions that run on the main thread (docs/security.md, "Hostile
// content"): each is timed once on the input that made it super-linear before its fix, so a
// regression shows as seconds where this prints milliseconds. Run with the code to compare
// checked out (the figures before the fixes are in the commits that made them):
//   node bench/hostile-inputs.ts
import { gzipSync } from 'node:zlib';
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../src/context.ts';
import { reportFiles } from '../src/domain/domains/report-files.ts';
import { handleReport } from '../src/domain/inbound/reports.ts';
import type { InboundInput } from '../src/domain/inbound/inbound.ts';
import { blocksAny } from '../src/domain/inboxes/lists.ts';
import { messageIdsIn } from '../src/domain/mail/threads.ts';
import { readHtml } from '../src/domain/screening/hidden.ts';
import { visibleBodies } from '../src/domain/screening/visible.ts';
import { htmlBody } from '../src/domain/sending/replies.ts';
import { mailboxMatcher } from '../src/imap/mailbox-pattern.ts';
import { resolveSet } from '../src/imap/sequence.ts';
import { parseStsPolicy } from '../src/outbound/mta-sts.ts';

async function time(what: string, run: () => unknown): Promise<void> {
  const started = performance.now();
  let outcome = 'ok';
  try {
    await run();
  } catch (err) {
    outcome = `refused: ${(err as Error).message.slice(0, 70)}`;
  }
  console.log(`${(performance.now() - started).toFixed(0).padStart(7)} ms  ${what} (${outcome})`);
}

const ids = (n: number) => Array.from({ length: n }, (_, i) => `<id-${i}-abcdefgh@example.org>`).join('\r\n ');
await time('References with 30,000 Message-IDs', () => messageIdsIn(ids(30_000)));
await time('References with 300,000 Message-IDs', () => messageIdsIn(ids(300_000)));

// Four 10 KB gzip attachments of 10 MB of XML that is no report, at a report address.
const bomb = gzipSync(`<?xml version="1.0"?><note>${'<x>y</x>'.repeat(1_300_000)}</note>`);
const reportMail = { attachments: Array.from({ length: 4 }, () => ({ content: bomb })), text: '' } as unknown as ParsedMail;
const reportCtx = { config: { inbound: { report_max_bytes: 10_485_760 } } } as unknown as AppContext;
await time(`report mail, four gzips of ${bomb.length} bytes expanding to 10 MB each`, async () => {
  for await (const file of reportFiles(reportCtx, reportMail, /\.xml$/i)) void file;
});

// A report mail at 100 bounce addresses, 18 MB of text (no report: it stops before any write).
const text = 'x: y\n\n'.repeat(3_000_000);
const bounce = { headers: new Map(), text, attachments: [{ contentType: 'text/plain', content: Buffer.from(text) }], from: { value: [{ address: 'someone@example.com' }] }, subject: 'hi' };
const targets = Array.from({ length: 100 }, (_, i) => ({ messageId: `msg_${i}`, recipient: `r${i}@example.com`, inboxId: 'inb' }));
await time('bounce mail of 18 MB of text for 100 targets', () =>
  handleReport({} as AppContext, bounce as unknown as ParsedMail, { raw: Buffer.alloc(0), mailFrom: 'x@y', recipients: [], bounces: targets } as unknown as InboundInput),
);

const from = Array.from({ length: 90_000 }, (_, i) => `a${i}@x.io`);
await time('receive lists: 1,000 block entries against 90,000 From addresses', () =>
  blocksAny(
    Array.from({ length: 1000 }, (_, i) => ({ kind: 'block', entry: `spam${i}.example` })),
    from,
  ),
);
await time('forwarding HTML of 1 MB repeating <body>', () => htmlBody('<body>'.repeat(174_763)));

await time('<style> of 1 MB without a brace', () => readHtml(`<style>${'a'.repeat(1 << 20)}</style><p>x</p>`));
await time('131,072 nested <b>', () => readHtml('<b>x'.repeat(131_072)));
await time('visible part: a hidden div, then 800 KB of nested <b>', () => visibleBodies(null, `<div style="display:none">hidden</div>${'<b>x'.repeat(200_000)}`));

await time('MTA-STS policy line with 64 KB of blanks', () => parseStsPolicy(`version: STSv1\nmode: enforce\nmx: a${' '.repeat(65_536)}b\nmax_age: 60\n`));

await time('IMAP LIST pattern of 200 stars', () => mailboxMatcher(`${'*'.repeat(200)}x`)('a'.repeat(30)));
const uids = Array.from({ length: 400_000 }, (_, i) => i + 1);
await time('IMAP sequence set of 10,000 reversed ranges over 400,000 messages', () => resolveSet(Array.from({ length: 10_000 }, (_, i) => `${i * 40 + 20}:${i * 40 + 1}`).join(','), uids, true));
await time('IMAP sequence set of 2,000,000 ranges (answered BAD past 10,000)', () => resolveSet(Array.from({ length: 2_000_000 }, () => '1').join(','), uids.slice(0, 1000), true));
