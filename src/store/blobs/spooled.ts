// Spooled messages as stored sources. A message accepted into the spool (src/domain/inbound/spool.ts)
// has its bytes, trace fields first, in a spooled_messages row committed before its 250; the
// transaction that stores the message keeps that row as the message's raw source instead of
// writing the bytes again (a file and its fsync on SQLite, blob rows on PostgreSQL). Such a
// source is named `raw/spooled/<job id>`, and both blob stores (Blobs, DbBlobs) read and remove
// it from its row, so every reader of `messages.raw_path` (the raw download, IMAP, replies,
// exports) finds it as it finds any other.
import { Readable } from 'node:stream';
import type { Db } from '../store.ts';
import { SPOOLED_SOURCE_PREFIX as PREFIX, findSpooledRaw } from '../repo/spool.ts';

/** The blob key of the source kept in job `jobId`'s spooled row. */
export const spooledSourceKey = (jobId: string): string => `${PREFIX}${jobId}`;

/** The job whose spooled row holds `rel`, when `rel` names one. */
export const spooledSourceJob = (rel: string): string | undefined => (rel.startsWith(PREFIX) ? rel.slice(PREFIX.length) : undefined);

/** The bytes of a spooled source; rejects with code ENOENT when its row is gone, as a missing blob does. */
export async function readSpooledSource(db: Db, jobId: string): Promise<Buffer> {
  const raw = await findSpooledRaw(db, jobId);
  if (!raw) throw Object.assign(new Error(`no spooled source for job ${jobId}`), { code: 'ENOENT' });
  return raw;
}

/** readSpooledSource as a stream (a spooled message is small: at most SPOOL_MAX_MESSAGE_BYTES). */
export function streamSpooledSource(db: Db, jobId: string): Readable {
  return Readable.from(
    (async function* () {
      yield await readSpooledSource(db, jobId);
    })(),
  );
}
