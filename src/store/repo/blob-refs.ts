// Whether a row names a stored file: reads `messages` (raw sources) and `attachments` for
// src/store/blobs/blob-refs.ts, which removes a file once no row names it.
import { preparedQuery, preparedRows } from '../prepared.ts';
import type { Db } from '../store.ts';

const named = (db: Db) => preparedRows<[string, string], [number]>(db, 'SELECT 1 FROM messages WHERE raw_path = ? UNION ALL SELECT 1 FROM attachments WHERE storage_path = ? LIMIT 1');

/** True when a message's raw source or an attachment is stored at `rel`. */
export async function isBlobNamed(db: Db, rel: string): Promise<boolean> {
  return (await preparedQuery(db, named).get(rel, rel)) !== undefined;
}
