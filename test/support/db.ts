// Tests read and write rows directly, as src/store does: with drizzle's handle, which code
// outside src/store holds only as the opaque Tx (src/store/store.ts).
import type { Db, Tx } from '../../src/store/store.ts';

export const sqlDb = (ctx: { db: Tx }): Db => ctx.db;
