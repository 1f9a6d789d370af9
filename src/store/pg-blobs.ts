// Blobs in PostgreSQL: raw messages and attachment bytes as rows of blob_chunks (1 MiB each),
// written in the caller's transaction, so a message and its bytes commit together on whichever
// node took it, and read back or streamed by any node. Streaming fetches one chunk at a time:
// a 25 MB download holds about one chunk in memory, not the file.
import { Readable } from 'node:stream';
import type { Db, Store } from './store.ts';

export const CHUNK_BYTES = 1024 * 1024;

export class BlobNotFoundError extends Error {
  readonly code = 'ENOENT';
  constructor(key: string) {
    super(`no blob ${key}`);
  }
}

export class PgBlobs {
  constructor(
    private readonly store: Store,
    private readonly chunkBytes = CHUNK_BYTES,
  ) {}

  /**
   * Stores `data` under `key` through `db` (a transaction handle to commit it with rows).
   * Writing a key again is a no-op (content-addressed keys name the same bytes).
   */
  async write(db: Db, key: string, data: Buffer | string | Buffer[]): Promise<void> {
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
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
