// (h) Large messages and (i) fan-out on disk (issue 16's resource findings):
//  - ten 25 MB messages sent at once over ten connections, each retried after a 4xx the way an
//    MTA would: the server's peak RSS (VmHWM) above its idle RSS, how many transactions were
//    deferred by smtp.memory_budget, and the time until all ten were stored; the baseline is a
//    bare smtp-server that reads and discards (bench/baselines/smtp-discard.ts);
//  - one message (a 1 MB attachment) to 50 inboxes: bytes added under data_dir per recipient;
//    the baseline is the message's own size.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import nodemailer from 'nodemailer';
import type { TestDns } from '../../test/support/dns.ts';
import { createInbox, startMailroom } from '../mailroom.ts';
import { log, memoryOf, round, sleep, startBaseline, stopChild, type ScenarioResult } from '../support.ts';
import { judge } from '../targets.ts';

const LARGE = 10;
/** Attachment bytes: base64 makes the message about 25 MB (the default smtp.max_message_bytes). */
const ATTACHMENT = Math.floor((25 * 1024 * 1024 * 0.97 * 3) / 4);

/** A message of about 25 MB: headers, a short text part, one base64 attachment of random bytes. */
function largeMessage(to: string, n: number): Buffer {
  const b64 = randomBytes(ATTACHMENT).toString('base64').replace(/.{76}/g, '$&\r\n');
  return Buffer.from(
    `From: big@source.bench\r\nTo: ${to}\r\nSubject: large ${n}\r\nMessage-ID: <large-${n}-${Date.now()}@source.bench>\r\nMIME-Version: 1.0\r\n` +
      `Content-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee the attachment\r\n` +
      `--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="big${n}.bin"\r\nContent-Transfer-Encoding: base64\r\n\r\n${b64}\r\n--b--\r\n`,
  );
}

interface LargeRun {
  seconds: number;
  deferred: number;
  failed: number;
}

/** Sends the messages at once, one connection each, retrying a 4xx after 200 ms like an MTA's queue. */
async function sendAll(port: number, messages: Buffer[], to: string): Promise<LargeRun> {
  const t0 = performance.now();
  let deferred = 0;
  let failed = 0;
  await Promise.all(
    messages.map(async (raw) => {
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, socketTimeout: 300_000 });
      try {
        for (let attempt = 0; attempt < 600; attempt++) {
          try {
            await transport.sendMail({ envelope: { from: 'big@source.bench', to: [to] }, raw });
            return;
          } catch (err) {
            const code = (err as { responseCode?: number }).responseCode ?? 0;
            if (code < 400 || code >= 500) {
              failed++;
              log(`large message refused: ${(err as Error).message}`);
              return;
            }
            deferred++;
            await sleep(200);
          }
        }
        failed++;
      } finally {
        transport.close();
      }
    }),
  );
  return { seconds: round((performance.now() - t0) / 1000, 1), deferred, failed };
}

function bytesUnder(dir: string): number {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .reduce((sum, e) => sum + statSync(join(e.parentPath, e.name)).size, 0);
}

export async function largeMessages(env: { dns: TestDns }): Promise<ScenarioResult[]> {
  // ---- (h) ten 25 MB messages at once ----
  const mr = await startMailroom('large', { dns: env.dns.server });
  const inbox = await createInbox(mr, { address: 'big' });
  const messages = Array.from({ length: LARGE }, (_, i) => largeMessage(inbox.address, i));
  const mb = messages[0].length / 1024 / 1024;
  await sleep(3000);
  const idle = memoryOf(mr.pid)!;
  const run = await sendAll(mr.smtpPort, messages, inbox.address);
  const peak = memoryOf(mr.pid)!;
  const stored = (await mr.api('GET', `/inboxes/${inbox.id}/messages?limit=1`)).body.total as number;
  await mr.stop();

  const base = await startBaseline('smtp-discard.ts');
  await sleep(1000);
  const baseIdle = memoryOf(base.child.pid!)!;
  const baseRun = await sendAll(base.port, messages, inbox.address);
  const basePeak = memoryOf(base.child.pid!)!;
  await stopChild(base.child);
  log(`large: peak ${peak.peakMb} MB (idle ${idle.rssMb}), deferred ${run.deferred}, ${run.seconds} s; baseline peak ${basePeak.peakMb} MB`);

  // ---- (i) one message to 50 inboxes ----
  const fan = await startMailroom('fanout', { dns: env.dns.server });
  const addresses: string[] = [];
  for (let i = 0; i < 50; i++) addresses.push((await createInbox(fan, { address: `fan${i}` })).address);
  await sleep(500);
  const before = bytesUnder(fan.dataDir);
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: fan.smtpPort, secure: false, ignoreTLS: true });
  const info = await transport.sendMail({
    from: 'bulk@source.bench',
    to: addresses,
    subject: 'fan-out',
    text: 'to everyone',
    attachments: [{ filename: 'one.bin', content: randomBytes(1024 * 1024) }],
  });
  transport.close();
  // Files are fsynced before the 250 and the rows committed: what is on disk now stays.
  const added = bytesUnder(fan.dataDir) - before;
  const messageBytes = (await fan.api('GET', `/messages/${/stored as (\S+)/.exec(info.response)![1]}`)).body.size as number;
  await fan.stop();
  log(`fanout: ${added} bytes for 50 recipients of a ${messageBytes}-byte message`);

  return [
    {
      id: 'large',
      title: '(h) Ten 25 MB messages at once',
      status: 'ok',
      setup: `${LARGE} messages of ${round(mb, 1)} MB (one base64 attachment) over ${LARGE} connections at once, each retried 200 ms after a 4xx as an MTA would; peak RSS (VmHWM) of the server process; baseline: a bare smtp-server that reads and discards`,
      rows: [
        {
          metric: 'peak RSS',
          unit: 'MB',
          mailroom: peak.peakMb,
          baselines: [{ name: 'smtp-server discarding', value: basePeak.peakMb }],
          ...judge('largePeakMb', peak.peakMb),
          note: `idle ${idle.rssMb} MB (baseline idle ${baseIdle.rssMb} MB)`,
        },
        { metric: 'transactions deferred by smtp.memory_budget (452, retried)', unit: '', mailroom: run.deferred, note: `${run.failed} failed, ${stored} of ${LARGE} stored` },
        { metric: 'time until all ten were answered 250', unit: 's', mailroom: run.seconds, baselines: [{ name: 'smtp-server discarding', value: baseRun.seconds }] },
      ],
    },
    {
      id: 'fanout',
      title: '(i) One message to 50 inboxes, on disk',
      status: 'ok',
      setup:
        'one message with a 1 MB attachment to 50 inboxes in one SMTP transaction; bytes added under data_dir (raw and attachment files, database and WAL), per recipient; baseline: the size of the message itself',
      rows: [
        {
          metric: 'disk bytes per recipient',
          unit: 'KB',
          mailroom: round(added / 50 / 1024),
          baselines: [{ name: 'the message', value: round(messageBytes / 1024) }],
          note: `${round(added / 1024 / 1024, 2)} MB in all`,
        },
      ],
    },
  ];
}
