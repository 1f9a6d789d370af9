// The `tls-report` job: once a UTC day has ended, its TLS-RPT reports (RFC 8460) go out
// (src/outbound/tls-rpt.ts) and the counts they cover are deleted with the job's outcome. The
// first delivery of the day to a domain that asks for reports queues it; each day's job has a
// fixed id, so every later delivery, node and restart finds it there and makes no other.
import type { Db } from '../../store/client.ts';
import { sendTlsReports } from '../../outbound/tls-rpt.ts';
import { deleteTlsResultsUpTo } from '../../store/repo/transport.ts';
import type { JobHandler } from '../runner.ts';
import { enqueueJobOnce, ok } from '../table.ts';

export const TLS_REPORT_JOB = 'tls-report';

const DAY_MS = 86_400_000;
/**
 * Reports go out this long after midnight UTC, so that the day's last attempts have ended and
 * the receivers do not get every sender's reports at 00:00 exactly (RFC 8460 §4.1).
 */
const AFTER_MIDNIGHT_MS = 15 * 60_000;

/** Queues the job that reports on `day` (YYYY-MM-DD) unless it exists. */
export function scheduleTlsReport(db: Db, now: Date, day: string): Promise<boolean> {
  const runAt = Date.parse(`${day}T00:00:00Z`) + DAY_MS + AFTER_MIDNIGHT_MS;
  return enqueueJobOnce(db, now, `job_tlsrpt_${day}`, { kind: TLS_REPORT_JOB, payload: { day }, maxAttempts: 1, runAt });
}

export const tlsReportHandler: JobHandler = {
  kind: TLS_REPORT_JOB,
  // Reports are best effort (RFC 8460 §4.1): a report a receiver refuses is logged, not retried.
  schedule: () => [],
  async run(ctx, job) {
    const { day } = JSON.parse(job.payload) as { day: string };
    // dry-run: nothing leaves the box, reports included.
    if (ctx.config.outbound.tls_reports && ctx.config.outbound.mode === 'email') {
      const sent = await sendTlsReports(ctx, day);
      ctx.log.info('TLS reports sent', { day, sent });
    }
    return ok((tx) => deleteTlsResultsUpTo(tx, day));
  },
};
