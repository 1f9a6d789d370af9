// Every kind of job the runner knows. Each feature adds its handler here.
import type { JobHandler } from '../runner.ts';
import { holdExpiryHandler } from './hold-expiry.ts';
import { inboundHandler } from './inbound.ts';
import { releaseHandler } from './release.ts';
import { sendHandler } from './send.ts';
import { tlsReportHandler } from './tls-report.ts';
import { webhookHandler } from './webhook.ts';

export const JOB_HANDLERS: JobHandler[] = [sendHandler, webhookHandler, inboundHandler, releaseHandler, holdExpiryHandler, tlsReportHandler];
