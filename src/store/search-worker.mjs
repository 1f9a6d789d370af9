// The search worker (src/store/search-reader.ts): runs the read-only statements of searches on
// its own read-only connection to the SQLite file, off the main thread, so a costly search
// holds this thread and not the event loop that serves HTTP, SMTP and jobs. WAL lets it read
// while the main connection writes; each statement sees the last commit. The main thread
// terminates this worker when a search runs past its budget.
//
// In: { id, sql, params, method } ('all' | 'get' | 'values' | 'run' is refused: read-only).
// Out: { id, rows } or { id, error: { message, code } }.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** Distinct SQL texts kept compiled (searches make a few shapes per term count). */
const STATEMENT_CACHE_SIZE = 200;

let nativeBinding;
if (workerData.addonPath) {
  // The single executable's addon, already written to its cache directory by the main thread.
  const addon = { exports: {} };
  process.dlopen(addon, workerData.addonPath);
  nativeBinding = addon.exports;
}
const db = new Database(workerData.file, { readonly: true, fileMustExist: true, ...(nativeBinding ? { nativeBinding } : {}) });

const statements = new Map();
function statement(sql) {
  let stmt = statements.get(sql);
  if (stmt) return stmt;
  stmt = db.prepare(sql);
  if (!stmt.reader) throw new Error('a search runs read-only statements only');
  stmt.raw(true);
  if (statements.size >= STATEMENT_CACHE_SIZE) statements.delete(statements.keys().next().value);
  statements.set(sql, stmt);
  return stmt;
}

parentPort.on('message', ({ id, sql, params, method }) => {
  try {
    const stmt = statement(sql);
    parentPort.postMessage({ id, rows: method === 'get' ? stmt.get(...params) : stmt.all(...params) });
  } catch (err) {
    parentPort.postMessage({ id, error: { message: err.message, code: err.code } });
  }
});
