// Blobs in PostgreSQL: raw messages and attachment bytes as rows of blob_chunks (256 KiB each),
// written in the caller's transaction, so a message and its bytes commit together on whichever
// node took it, and read back or streamed by any node. Streaming fetches one chunk at a time:
// a 25 MB download holds about one chunk in memory, not the file. PgBlobs serves the embedded
// engine's blob_chunks too, where small outbound sources are kept (src/store/blobs/blobs.ts ROW_BLOB_PREFIX).
import { createReadStream, promises as fs } from 'node:fs';
import { Readable } from 'node:stream';
import type { BlobStore, UnreferencedPage } from './blobs.ts';
import type { Db, Store } from '../store.ts';
import { readSpooledSource, spooledSourceJob, streamSpooledSource } from './spooled.ts';
import { deleteSpooledMessage } from '../repo/spool.ts';

export const CHUNK_BYTES = 256 * 1024;

export class BlobNotFoundError extends Error {
  readonly code = 'ENOENT';
  constructor(key: string) {
    super(`no blob ${key}`);
  }
}

export class PgBlobs {
  private readonly store: Store;
  private readonly chunkBytes: number;
  constructor(store: Store, chunkBytes = CHUNK_BYTES) {
    this.store = store;
    this.chunkBytes = chunkBytes;
  }

  /**
   * Stores `data` under `key` through `db` (a transaction handle to commit it with rows).
   * Writing a key again is a no-op (content-addressed keys name the same bytes).
   */
  async write(db: Db, key: string, data: Buffer | string | Buffer[]): Promise<void> {
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    let seq = 0;
    for (let at = 0; at < bytes.length || seq === 0; at += this.chunkBytes) {
      await this.putChunk(db, key, seq++, bytes.subarray(at, at + this.chunkBytes));
    }
  }

  /** Stores what `source` yields, a chunk at a time; answers the size. A source error stores nothing (the caller's transaction rolls back). */
  async writeStream(db: Db, key: string, source: Readable): Promise<number> {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let seq = 0;
    let size = 0;
    const flush = async (all: boolean) => {
      while (pendingBytes >= this.chunkBytes || (all && (pendingBytes > 0 || seq === 0))) {
        const joined = Buffer.concat(pending);
        const chunk = joined.subarray(0, this.chunkBytes);
        const rest = joined.subarray(chunk.length);
        pending = rest.length ? [rest] : [];
        pendingBytes = rest.length;
        await this.putChunk(db, key, seq++, chunk);
      }
    };
    for await (const piece of source) {
      const buf = Buffer.isBuffer(piece) ? piece : Buffer.from(piece as string);
      pending.push(buf);
      pendingBytes += buf.length;
      size += buf.length;
      await flush(false);
    }
    await flush(true);
    return size;
  }

  async read(db: Db, key: string): Promise<Buffer> {
    const rows = await this.store.rows<[Buffer]>(db, 'SELECT data FROM blob_chunks WHERE key = ? ORDER BY seq', [key]);
    if (!rows.length) throw new BlobNotFoundError(key);
    return Buffer.concat(rows.map((r) => r[0]));
  }

  /** The blob as a stream, one chunk fetched per read; errors with BlobNotFoundError when absent. */
  stream(key: string): Readable {
    const { store } = this;
    return Readable.from(
      (async function* () {
        for (let seq = 0; ; seq++) {
          const [row] = await store.rows<[Buffer]>(store.db, 'SELECT data FROM blob_chunks WHERE key = ? AND seq = ?', [key, seq]);
          if (!row) {
            if (seq === 0) throw new BlobNotFoundError(key);
            return;
          }
          yield row[0];
        }
      })(),
      { objectMode: false },
    );
  }

  async exists(db: Db, key: string): Promise<boolean> {
    return (await this.store.rows(db, 'SELECT 1 FROM blob_chunks WHERE key = ? AND seq = 0', [key])).length > 0;
  }

  /** Removes blob `key` through `db`; answers 1, or 0 when it was not there. */
  async removeKey(db: Db, key: string): Promise<number> {
    return (await this.store.run(db, 'DELETE FROM blob_chunks WHERE key = ?', [key])) > 0 ? 1 : 0;
  }

  /**
   * Up to `limit` blobs by key after `after`, and among them those written before `beforeMs`
   * (epoch) that no row names: a page of the orphan sweep's candidates (`last`: where the next
   * page starts, none after the last). On SQLite the page reads index blob_chunks_sweep alone.
   */
  async unreferenced(beforeMs: number, after: string, limit: number): Promise<UnreferencedPage> {
    const rows = await this.store.rows<[string, number]>(
      this.store.db,
      `SELECT b.key,
              CASE WHEN b.created_at < ?
                    AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.raw_path = b.key)
                    AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.storage_path = b.key)
                   THEN 1 ELSE 0 END
         FROM blob_chunks b WHERE b.seq = 0 AND b.key > ? ORDER BY b.key LIMIT ?`,
      [beforeMs, after, limit],
    );
    return { keys: rows.filter(([, unnamed]) => Number(unnamed) === 1).map(([key]) => key), last: rows.length === limit ? rows[rows.length - 1][0] : undefined };
  }

  /** Removes the blobs; through a transaction handle, they go with the rows that named them. */
  async remove(db: Db, keys: Iterable<string>): Promise<void> {
    const list = [...new Set(keys)];
    if (!list.length) return;
    const marks = list.map(() => '?').join(', ');
    await this.store.run(db, `DELETE FROM blob_chunks WHERE key IN (${marks})`, list);
  }

  private async putChunk(db: Db, key: string, seq: number, data: Buffer): Promise<void> {
    await this.store.run(db, 'INSERT INTO blob_chunks (key, seq, data) VALUES (?, ?, ?) ON CONFLICT (key, seq) DO NOTHING', [key, seq, data]);
  }
}

/**
 * The BlobStore of a PostgreSQL installation (src/store/blobs/blobs.ts): every blob a transaction
 * of its own, committed (durable) when the write resolves, like an fsynced file. A removal and
 * the re-creation at commit of a shared (content-addressed) blob take the blob's advisory lock,
 * so one never undoes the other (the row check of src/store/blobs/blob-refs.ts takes it too).
 */
export class DbBlobs implements BlobStore {
  private readonly pg: PgBlobs;
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
    this.pg = new PgBlobs(store);
  }

  write(rel: string, data: Buffer | string | Buffer[]): Promise<void> {
    return this.store.transaction((tx) => this.pg.write(tx, rel, data));
  }

  async writeStream(rel: string, source: Readable): Promise<void> {
    // An error the source emits before it is read (a truncated upload while the transaction
    // begins) must not be an uncaught 'error' event; reading it then rejects with it.
    const early = () => {};
    source.on('error', early);
    try {
      await this.store.transaction((tx) => this.pg.writeStream(tx, rel, source));
    } finally {
      source.off('error', early);
    }
  }

  async adopt(rel: string, staged: string): Promise<void> {
    await this.store.transaction((tx) => this.pg.writeStream(tx, rel, createReadStream(staged)));
    // The bytes are stored: a staged file that cannot be removed is the orphan sweep's
    // (src/store/blobs/orphans.ts), never a reason to refuse the message.
    await fs.rm(staged, { force: true }).catch(() => undefined);
  }

  async writeIn(tx: Db, rel: string, data: Buffer | Buffer[] | { staged: string }): Promise<void> {
    if (Buffer.isBuffer(data) || Array.isArray(data)) await this.pg.write(tx, rel, data);
    else await this.pg.writeStream(tx, rel, createReadStream(data.staged));
  }

  async link(rel: string, staged: string): Promise<void> {
    await this.store.transaction(async (tx) => {
      if (!(await this.pg.exists(tx, rel))) await this.pg.writeStream(tx, rel, createReadStream(staged));
    });
  }

  async ensure(tx: Db, rel: string, content: Buffer | { staged: string }): Promise<void> {
    await this.store.lock(tx, `blob:${rel}`);
    if (await this.pg.exists(tx, rel)) return;
    if (Buffer.isBuffer(content)) await this.pg.write(tx, rel, content);
    else await this.pg.writeStream(tx, rel, createReadStream(content.staged));
  }

  writeRowsIn(tx: Db, rel: string, data: Buffer): Promise<void> {
    return this.pg.write(tx, rel, data);
  }

  async remove(tx: Db, rel: string): Promise<number> {
    await this.store.lock(tx, `blob:${rel}`);
    const job = spooledSourceJob(rel);
    if (job) return deleteSpooledMessage(tx, job);
    return this.pg.removeKey(tx, rel);
  }

  read(rel: string): Promise<Buffer> {
    const job = spooledSourceJob(rel);
    if (job) return readSpooledSource(this.store.db, job);
    return this.pg.read(this.store.db, rel);
  }

  stream(rel: string): Readable {
    const job = spooledSourceJob(rel);
    if (job) return streamSpooledSource(this.store.db, job);
    return this.pg.stream(rel);
  }

  unreferenced(beforeMs: number, after: string, limit: number): Promise<UnreferencedPage> {
    return this.pg.unreferenced(beforeMs, after, limit);
  }
}
