// The inbound spool: how mail arriving over SMTP is stored before its 250. Normally a message is
// processed (parsed, authenticated, stored with its threads and events) before the reply. While
// `smtp.inline_processing` messages are already being processed, or mail waits in the spool,
// further ones are spooled: the raw bytes and an `inbound` job committed in one transaction,
// answered 250, and processed by the job runner moments later. Either way the 250 means the
// message is on disk.
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { enqueueJobs, getJob } from '../../jobs/table.ts';
import { AppError, isAppError } from '../errors.ts';
import { acceptInbound, isEmptyMessage, prepareInbound, type InboundInput } from './inbound.ts';
import type { BounceTarget } from './bounce-address.ts';
import type { ServiceTarget } from './service-address.ts';
// Registers the handler of mail at service addresses (unsubscribe, DMARC and TLS reports).
import './service-mail.ts';
import { LARGE_MESSAGE_BYTES, isStaged } from './inbound-large.ts';
import { countUnfinishedJobsOfKind, requeueJob } from '../../store/repo/jobs.ts';
import { deleteSpooledMessage, insertSpooledMessages, listSpooledRaw, spooledMessageExists, spooledSourceUnclaimed } from '../../store/repo/spool.ts';
import { listInboxesByIds } from '../../store/repo/inboxes.ts';
import { isBlobNamed } from '../../store/repo/blob-refs.ts';
import { spooledSourceKey } from '../../store/blobs/spooled.ts';
import { newId } from '../../ids.ts';
import { traceHeaders } from './inbound-parse.ts';
import { sendAlong, sharedReadsOf } from '../../store/store.ts';

export const INBOUND_JOB = 'inbound';

/**
 * Larger messages are always processed before the reply: the spool keeps bytes in the database,
 * which suits the small messages of a burst, not 25 MB attachments.
 */
export const SPOOL_MAX_MESSAGE_BYTES = LARGE_MESSAGE_BYTES;

/** What an `inbound` job carries besides the bytes (spooled_messages.raw). */
export interface SpooledEnvelope {
  mailFrom: string;
  recipients: string[];
  remoteAddress?: string;
  heloName?: string;
  secure?: boolean;
  /** ISO time of the 250. */
  receivedAt: string;
  /** Bounce addresses among the recipients (checked at RCPT). */
  bounces?: BounceTarget[];
  /** Service addresses among the recipients (checked at RCPT). */
  services?: ServiceTarget[];
  /**
   * The id of the message's first copy, which its trace fields name, and their length: the
   * spooled bytes are the trace fields then the message, kept as its stored source. Absent in
   * jobs spooled before that (their bytes are the message alone, written again when stored).
   */
  firstMessageId?: string;
  traceLength?: number;
}

interface SpoolState {
  /** Messages being processed before their reply right now. */
  inline: number;
  /** Date.now() of the last message spooled. */
  spooledAt: number;
  /** A wake-up of the job runner is pending. */
  wakeScheduled: boolean;
  /** Spooled messages not processed yet, as last counted (plus those spooled since). */
  depth: number;
  countedAt: number;
  /** Date.now() of each message this process spooled and has not seen end, oldest first. */
  waiting: number[];
  /** Messages waiting for the next spool batch (spoolInBatch), and whether a batch is under way. */
  batch: Spooling[];
  batching: boolean;
}

const states = new WeakMap<AppContext, SpoolState>();
const stateOf = (ctx: AppContext): SpoolState => {
  let s = states.get(ctx);
  if (!s) states.set(ctx, (s = { inline: 0, spooledAt: -Infinity, wakeScheduled: false, depth: 0, countedAt: -Infinity, waiting: [], batch: [], batching: false }));
  return s;
};

/** Mail was spooled within the last second: SMTP is taking a burst. */
const smtpBusy = (ctx: AppContext): boolean => Date.now() - stateOf(ctx).spooledAt < 1000;

/**
 * Spooled messages processed at once. During a burst (mail spooled within the last second, at
 * least BURST_DEPTH messages waiting, none of them for longer than BURST_WAIT_MS) while the spool
 * is less than half full: one, so the event loop's time goes to accepting mail (bench/ (a), one
 * run each: 1.55x Haraka's rate with one, 1.15x with two, and all mail visible sooner too, 15.7 s
 * against 17.9 s). Otherwise the runner's full concurrency (jobs.concurrency): a short queue is
 * worked off at once, so mail goes back to being processed before its 250, and a steady flow
 * is not kept waiting behind its own 250s: bench/ (o) measured, at 300 msg/s offered, ~6 s from
 * 250 to visible while the queue was processed one message at a time, and at 1,500 msg/s the
 * spool filled at the serial rate. Under sustained load the spool is worked off and accepting
 * slows down well before the spool is full and senders get 451.
 */
export function spoolProcessingLimit(ctx: AppContext): number {
  // The depth as last counted: while SMTP is busy it was recounted within the last second.
  const s = stateOf(ctx);
  const oldest = s.waiting[0];
  return spoolLimitFor({
    spooling: smtpBusy(ctx),
    depth: s.depth,
    oldestWaitMs: oldest === undefined ? Infinity : Date.now() - oldest,
    spoolLimit: ctx.config.smtp.spool_limit,
    concurrency: ctx.config.jobs.concurrency,
  });
}

/** The rule of spoolProcessingLimit, on what it reads (test/unit/spool-limit.test.ts). */
export function spoolLimitFor(q: { spooling: boolean; depth: number; oldestWaitMs: number; spoolLimit: number; concurrency: number }): number {
  const burst = q.spooling && q.depth >= BURST_DEPTH && q.oldestWaitMs < BURST_WAIT_MS && q.depth < q.spoolLimit / 2;
  return burst ? 1 : q.concurrency;
}

/** Longest wait of a spooled message for which processing still gives way to accepting. */
const BURST_WAIT_MS = 1000;
/** Messages waiting in the spool from which mail arriving meanwhile is taken for a burst. */
const BURST_DEPTH = 64;

/** Pending spooled messages, recounted (one indexed COUNT) at most once a second. */
async function spoolDepth(ctx: AppContext): Promise<number> {
  const s = stateOf(ctx);
  const now = Date.now();
  if (now - s.countedAt >= 1000) {
    s.countedAt = now;
    s.depth = await countUnfinishedJobsOfKind(ctx.db, INBOUND_JOB);
  }
  return s.depth;
}

/** The spool holds `smtp.spool_limit` messages already: the sender should retry later. */
export class SpoolFullError extends Error {
  constructor(limit: number) {
    super(`the inbound spool is full (${limit} messages waiting); try again later`);
    this.name = 'SpoolFullError';
  }
}

export type Received = { messageIds: string[]; spooledAs?: undefined } | { messageIds?: undefined; spooledAs: string };

/**
 * The SMTP path for one message: processed before the reply when fewer than
 * `smtp.inline_processing` are in progress and the spool is empty (or it is large), otherwise
 * spooled. Throws the AppError to answer (VALIDATION_ERROR for an empty message, as
 * acceptInbound does), or SpoolFullError when the spool is full.
 */
export async function receiveInbound(ctx: AppContext, input: InboundInput): Promise<Received> {
  const s = stateOf(ctx);
  // Once mail waits in the spool, new mail joins it rather than overtaking it: a burst is
  // accepted at spool speed from its first spooled message until the spool is worked off.
  const raw = input.raw;
  if ((s.inline >= ctx.config.smtp.inline_processing || (await spoolDepth(ctx)) > 0) && !isStaged(raw) && raw.length <= SPOOL_MAX_MESSAGE_BYTES) {
    s.spooledAt = Date.now();
    return { spooledAs: await spoolInbound(ctx, { ...input, raw }) };
  }
  s.inline++;
  try {
    return await acceptInbound(ctx, input);
  } finally {
    s.inline--;
  }
}

async function spoolInbound(ctx: AppContext, input: InboundInput & { raw: Buffer }): Promise<string> {
  if (isEmptyMessage(input.raw)) throw new AppError('VALIDATION_ERROR', 'empty message');
  if ((await spoolDepth(ctx)) >= ctx.config.smtp.spool_limit) {
    throw new SpoolFullError(ctx.config.smtp.spool_limit);
  }
  const now = ctx.clock.now();
  // Written once: the trace fields and the message, as the stored source will be (processSpooled).
  const messageId = newId('msg');
  const trace = traceHeaders(ctx, input, messageId, now);
  const envelope: SpooledEnvelope = {
    mailFrom: input.mailFrom,
    recipients: [...new Set(input.recipients.map((r) => r.id))],
    remoteAddress: input.remoteAddress,
    heloName: input.heloName,
    secure: input.secure,
    receivedAt: now.toISOString(),
    ...(input.bounces?.length ? { bounces: input.bounces } : {}),
    ...(input.services?.length ? { services: input.services } : {}),
    firstMessageId: messageId,
    traceLength: trace.length,
  };
  const jobId = await spoolInBatch(ctx, envelope, trace.length ? Buffer.concat([trace, input.raw]) : input.raw);
  const s = stateOf(ctx);
  s.depth++;
  s.waiting.push(Date.now());
  // One wake-up of the job runner per 20 ms of spooling rather than one per message: each is
  // a claim pass (a transaction), and during a burst the runner is already busy with the spool.
  if (!s.wakeScheduled) {
    s.wakeScheduled = true;
    setTimeout(() => {
      s.wakeScheduled = false;
      ctx.notify('jobs');
    }, 20).unref();
  }
  return jobId;
}

/** Most messages in one spool batch, and most bytes (one message alone may be larger: up to SPOOL_MAX_MESSAGE_BYTES). */
export const SPOOL_BATCH_ROWS = 64;
const SPOOL_BATCH_BYTES = 2 * 1024 * 1024;

interface Spooling {
  envelope: SpooledEnvelope;
  raw: Buffer;
  resolve(jobId: string): void;
  reject(err: unknown): void;
}

/**
 * Spools one message with the others of the moment: the messages waiting when a batch starts go
 * into one transaction, one statement for their jobs and one for their bytes, and those arriving
 * while it commits form the next batch. Alone, a spooled message cost a transaction of its own,
 * which on PostgreSQL is four round trips (BEGIN, the job, the bytes, COMMIT) before its 250; on
 * SQLite the batches already shared a commit (Store.grouped), and now also their statements. A
 * failed batch fails each of its messages (451: the senders retry).
 */
function spoolInBatch(ctx: AppContext, envelope: SpooledEnvelope, raw: Buffer): Promise<string> {
  const s = stateOf(ctx);
  return new Promise((resolve, reject) => {
    s.batch.push({ envelope, raw, resolve, reject });
    if (!s.batching) {
      s.batching = true;
      setImmediate(() => void flushSpool(ctx));
    }
  });
}

async function flushSpool(ctx: AppContext): Promise<void> {
  const s = stateOf(ctx);
  let n = 0;
  for (let bytes = 0; n < s.batch.length && n < SPOOL_BATCH_ROWS; n++) {
    bytes += s.batch[n].raw.length;
    if (n > 0 && bytes > SPOOL_BATCH_BYTES) break;
  }
  const batch = s.batch.splice(0, n);
  const now = ctx.clock.now();
  try {
    const ids = await ctx.store.grouped(async (tx) => {
      const jobs = batch.map((m) => ({ kind: INBOUND_JOB, payload: m.envelope, partition: INBOUND_JOB, maxAttempts: INBOUND_RETRY_SCHEDULE.length + 1 }));
      const jobIds = await enqueueJobs(tx, now, jobs);
      await insertSpooledMessages(
        tx,
        batch.map((m, i) => ({ jobId: jobIds[i], raw: m.raw, createdAt: now.toISOString() })),
      );
      return jobIds;
    });
    batch.forEach((m, i) => m.resolve(ids[i]));
  } catch (err) {
    for (const m of batch) m.reject(err);
  }
  if (s.batch.length) setImmediate(() => void flushSpool(ctx));
  else s.batching = false;
}

/** Retries of a spooled message whose processing failed (a full disk, a failed write). */
export const INBOUND_RETRY_SCHEDULE = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000];

/**
 * What processSpooled reads first, shared by the jobs a claim hands out at once (sharedReads):
 * one statement for their bytes and one for their inboxes, not two a message.
 */
const readSpooled = sharedReadsOf((ctx: AppContext, jobIds: string[]) => listSpooledRaw(ctx.db, jobIds));
const readInbox = sharedReadsOf(async (ctx: AppContext, ids: string[]) => new Map((await listInboxesByIds(ctx.db, ids)).map((inbox) => [inbox.id, inbox])));

/**
 * Processes one spooled message: the same steps as a message processed before its reply, with
 * the 250's time as its received time. Returns what to commit with the job's end: the rows (if
 * any recipient inbox still exists), whose stored source is the spooled row itself, or else the
 * removal of that row. Null when the bytes are gone (the job already completed under an earlier
 * lease, and its message was deleted since).
 */
export async function processSpooled(ctx: AppContext, jobId: string, envelope: SpooledEnvelope): Promise<{ commit: (tx: Tx) => Promise<void>; keys: string[] } | null> {
  const [spooled, found] = await Promise.all([readSpooled(ctx, jobId), Promise.all([...new Set(envelope.recipients)].map((id) => readInbox(ctx, id)))]);
  if (!spooled) return null;
  const traceLength = envelope.traceLength ?? 0;
  const raw = spooled.subarray(traceLength);
  const key = spooledSourceKey(jobId);
  const source = envelope.firstMessageId ? { key, firstId: envelope.firstMessageId, trace: spooled.subarray(0, traceLength) } : undefined;
  const recipients = found.filter((inbox) => inbox !== undefined);
  // Runs inside the job's finishing transaction. A kept source is removed as any blob is
  // (removeUnreferenced): under its lock, and only while no message names it (the job ran
  // twice, its lease having run out, and the other run stored its message).
  const drop = async (tx: Tx) => {
    if (!source) return void (await deleteSpooledMessage(tx, jobId));
    await ctx.store.lock(tx, `blob:${key}`);
    if (!(await isBlobNamed(tx, key))) await deleteSpooledMessage(tx, jobId);
  };
  // Every recipient inbox was deleted after the 250: like deleting the stored message.
  if (recipients.length === 0 && !envelope.bounces?.length && !envelope.services?.length) return { commit: drop, keys: [] };
  const prepared = await prepareInbound(ctx, {
    raw,
    mailFrom: envelope.mailFrom,
    recipients,
    remoteAddress: envelope.remoteAddress,
    heloName: envelope.heloName,
    secure: envelope.secure,
    receivedAt: new Date(envelope.receivedAt),
    bounces: envelope.bounces,
    services: envelope.services,
    source,
  }).catch((err: unknown) => {
    // Refused by a rule that needs the message (no report at a bounce address, not on an allow
    // list): after its 250 it is dropped, as the 550 at DATA would have dropped it.
    if (isAppError(err) && err.code === 'FORBIDDEN') {
      ctx.log.info('spooled message refused', { jobId, reason: err.message });
      return null;
    }
    throw err;
  });
  if (!prepared) return { commit: drop, keys: [] };
  const commit = async (tx: Tx) => {
    if (source) {
      // Under the source's lock, as its removal takes it: a run whose message the job's other
      // run stored already, or whose row went since it was read, stores nothing (a row naming
      // a removed source, or a deleted message back again, otherwise).
      // Sent along: the server runs the read after it, once the lock is held.
      sendAlong(ctx.store.lock(tx, `blob:${key}`));
      if (!(await spooledSourceUnclaimed(tx, jobId))) return;
    }
    await prepared.store(tx);
    if (!source || !prepared.sourceNamed()) await drop(tx);
  };
  return { commit, keys: prepared.keys };
}

/**
 * Puts a failed spooled message back in the queue with a fresh set of attempts, once whatever
 * made its processing fail (a full disk, say) is fixed: `mailroom queue --retry`. Its bytes were
 * kept (the sweep of old jobs leaves jobs with spooled bytes alone).
 */
export async function retrySpooled(ctx: AppContext, jobId: string): Promise<void> {
  const job = await getJob(ctx, jobId);
  if (!job) throw new AppError('NOT_FOUND', `job ${jobId} not found (see \`mailroom queue --failed\`)`);
  if (job.kind !== INBOUND_JOB) throw new AppError('VALIDATION_ERROR', `job ${jobId} is a ${job.kind} job; only spooled inbound mail is retried this way`);
  if (job.status !== 'failed') throw new AppError('VALIDATION_ERROR', `job ${jobId} is ${job.status}; only a failed one can be retried`);
  const now = ctx.clock.now();
  await ctx.store.transaction(async (tx) => {
    if (!(await spooledMessageExists(tx, jobId))) {
      throw new AppError('VALIDATION_ERROR', `job ${jobId} has no spooled message left`);
    }
    await requeueJob(tx, jobId, now);
  });
  ctx.notify('jobs');
}

/** Called when an inbound job has ended (either way): the cached spool depth goes down. */
export function spoolJobEnded(ctx: AppContext): void {
  const s = stateOf(ctx);
  if (s.depth > 0) s.depth--;
  // Jobs end roughly in the order they were spooled: the oldest time goes.
  s.waiting.shift();
}
