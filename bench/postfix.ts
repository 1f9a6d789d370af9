// The durable baseline of (a) and (o): Debian's Postfix accepting over SMTP into its fsynced
// queue and delivering every message into a Maildir (the virtual delivery agent, which fsyncs
// each file before its rename into new/), the real MTA on the same box. The private instance is
// test/support/mta.ts's startPostfix (temp dir, loopback port, own spool and log), addressed
// at alice@remote.test, whose mailbox is a Maildir. Timed as mailroom is: from the first message
// sent until the last 250, and until the last message is a file in new/.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { postfixMissing, startPostfix } from '../test/support/mta.ts';
import { blast } from './scenarios/smtp.ts';
import { log, round, sleep, treeCpuMsOf } from './support.ts';

export interface PostfixRun {
  version: string;
  /** 250s per second (each 250 = in Postfix's fsynced queue). */
  acceptPerSecond: number;
  acceptSeconds: number;
  /** Messages per second from the first sent until the last is a file in the Maildir. */
  deliveredPerSecond: number;
  deliveredSeconds: number;
  delivered: number;
  /** CPU of the master and all its children (smtpd, cleanup, qmgr, virtual…), per message, in ms. */
  cpuMsPerMsg?: number;
}

const TO = 'alice@remote.test';
const LIMIT_MS = 180_000;

/** `count` messages of the bench's size over `sessions` reused sessions into Postfix → Maildir; a reason string when Postfix is missing. */
export async function postfixMaildir(count: number, sessions: number, warmup = 500): Promise<PostfixRun | string> {
  const missing = postfixMissing();
  if (missing) return missing;
  // Nothing is routed anywhere but the Maildir: mailroomPort is never dialled.
  const mta = await startPostfix({ mailroomPort: 9, routeDomains: [] });
  const maildir = join(mta.dir, 'mail', 'alice', 'new');
  const delivered = () => (existsSync(maildir) ? readdirSync(maildir).length : 0);
  const master = Number(readFileSync(join(mta.dir, 'spool', 'pid', 'master.pid'), 'utf8').trim());
  const waitDelivered = async (n: number): Promise<number> => {
    const deadline = performance.now() + LIMIT_MS;
    let got = 0;
    while ((got = delivered()) < n && performance.now() < deadline) await sleep(50);
    return got;
  };
  try {
    await blast(mta.port, TO, warmup, 10);
    await waitDelivered(warmup);
    const t0 = performance.now();
    const cpu0 = treeCpuMsOf(master);
    const sent = await blast(mta.port, TO, count, sessions);
    if (sent.error) throw new Error(`smtp-source into Postfix: ${sent.error}`);
    const got = (await waitDelivered(warmup + count)) - warmup;
    const seconds = (performance.now() - t0) / 1000;
    const cpu1 = treeCpuMsOf(master);
    const run: PostfixRun = {
      version: mta.version,
      acceptPerSecond: sent.msgPerSec,
      acceptSeconds: sent.seconds,
      deliveredPerSecond: round(got / seconds),
      deliveredSeconds: round(seconds, 2),
      delivered: got,
      cpuMsPerMsg: cpu0 !== undefined && cpu1 !== undefined ? round((cpu1 - cpu0) / count, 3) : undefined,
    };
    log(
      `Postfix ${run.version} → Maildir: ${run.acceptPerSecond} msg/s answered 250, ${got} of ${count} in the Maildir after ${run.deliveredSeconds} s (${run.deliveredPerSecond} msg/s), ${run.cpuMsPerMsg} ms CPU/msg`,
    );
    return run;
  } finally {
    await mta.stop();
  }
}
