// (d) Webhook latency: one message at a time over a reused SMTP connection (nodemailer pool)
// into an inbox with a `message.received` webhook on a loopback receiver; per message, the
// time from the 250 (the commit) and from the start of the SMTP transaction to the POST.
import nodemailer from 'nodemailer';
import type { TestDns } from '../../test/support/dns.ts';
import { createInbox, startMailroom } from '../mailroom.ts';
import { SkipError, log, startReceiver, summarize, type ScenarioResult } from '../support.ts';
import { judge } from '../targets.ts';

const COUNT = 200;
const WARMUP = 20;

export async function webhookLatency(env: { dns: TestDns }): Promise<ScenarioResult> {
  const waiting = new Map<string, (at: number) => void>();
  const receiver = await startReceiver((e: { data?: { subject?: string } }, at) => waiting.get(e.data?.subject ?? '')?.(at));
  const hookUrl = receiver.url;
  const m = await startMailroom('webhook', { dns: env.dns.server });
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: m.smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 1, maxMessages: Infinity });
  try {
    const inbox = await createInbox(m);
    const hook = await m.api('POST', '/webhooks', { url: hookUrl, events: ['message.received'] });
    if (hook.status === 404 && hook.body?.error?.code === 'NOT_FOUND') throw new SkipError('the webhooks API has not landed (POST /webhooks is 404)');
    if (hook.status !== 201) throw new Error(`POST /webhooks: ${hook.status} ${JSON.stringify(hook.body)}`);
    const fromCommit: number[] = [];
    const fromSubmit: number[] = [];
    for (let i = 0; i < WARMUP + COUNT; i++) {
      const subject = `webhook latency ${i}`;
      const received = new Promise<number>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no webhook for message ${i} within 10 s`)), 10_000);
        waiting.set(subject, (at) => {
          clearTimeout(t);
          resolve(at);
        });
      });
      const t0 = performance.now();
      await transport.sendMail({ from: 'sender@source.bench', to: inbox.address, subject, text: 'Latency probe.\n'.repeat(20) });
      const t250 = performance.now();
      const at = await received;
      waiting.delete(subject);
      if (i >= WARMUP) {
        fromCommit.push(at - t250);
        fromSubmit.push(at - t0);
      }
    }
    const commit = summarize(fromCommit);
    const submit = summarize(fromSubmit);
    log(`webhook: 250→POST p50 ${commit.p50} ms p99 ${commit.p99} ms; submit→POST p50 ${submit.p50} ms p99 ${submit.p99} ms`);
    return {
      id: 'webhook',
      title: '(d) Webhook latency, inbound mail to receipt',
      status: 'ok',
      setup: `${COUNT} messages (after ${WARMUP} warm-up), one at a time over one reused SMTP connection, each waiting for its webhook; receiver on loopback answering 204. "transaction start → POST" runs from nodemailer's sendMail call (MAIL FROM, RCPT, DATA, parse, files, commit) to the receiver reading the POST, an upper bound of commit → receiver; "250 → POST" is negative when the POST arrives before the 250 does`,
      rows: [
        // The target is "commit → receiver"; the transaction start is before the commit, so this
        // is an upper bound of it (the 250 itself waits for the WAL fsync; see README).
        { metric: 'SMTP transaction start → webhook POST, p50', unit: 'ms', mailroom: submit.p50, ...judge('webhookP50Ms', submit.p50) },
        { metric: 'SMTP transaction start → webhook POST, p99', unit: 'ms', mailroom: submit.p99 },
        { metric: '250 → webhook POST, p50', unit: 'ms', mailroom: commit.p50, note: commit.p50 < 0 ? 'negative: the POST usually arrived before the 250' : undefined },
        { metric: '250 → webhook POST, p99', unit: 'ms', mailroom: commit.p99 },
      ],
      details: { fromCommit: commit, fromSubmit: submit },
    };
  } finally {
    transport.close();
    await m.stop();
    receiver.close();
  }
}
