// The PostgreSQL form of src/store/schema.ts, derived from it table by table so there is one
// schema to edit. drizzle's table builders are per dialect; this file is what drizzle-kit reads
// to write migrations/pg/ (drizzle-pg.config.ts). Type mapping:
//   text → text; integer → bigint (counts, sizes and millisecond times; read back as numbers);
//   boolean-mode integer → integer holding 0/1, as in SQLite, so the one query builder's
//   parameters fit both; buffer blob → bytea.
// Defaults, primary keys, foreign keys (with their ON DELETE), indexes (unique and partial)
// carry over. A column type this file does not know stops the derivation with its name.
import { getTableColumns, is, SQL } from 'drizzle-orm';
import { getTableConfig, type SQLiteColumn, type SQLiteTable } from 'drizzle-orm/sqlite-core';
import { bigint, customType, index, integer, pgTable, primaryKey, text, uniqueIndex, type AnyPgColumn, type PgColumnBuilderBase, type PgTableWithColumns } from 'drizzle-orm/pg-core';
import * as sqlite from './schema.ts';

const bytea = customType<{ data: Buffer }>({ dataType: () => 'bytea' });

type AnyPgTable = PgTableWithColumns<any>;

const derived = new Map<SQLiteTable, AnyPgTable>();

function column(col: SQLiteColumn): PgColumnBuilderBase {
  let b;
  switch (col.columnType) {
    case 'SQLiteText':
      b = text(col.name);
      break;
    case 'SQLiteInteger':
      b = bigint(col.name, { mode: 'number' });
      break;
    case 'SQLiteBoolean':
      b = integer(col.name);
      break;
    case 'SQLiteBlobBuffer':
      b = bytea(col.name);
      break;
    default:
      throw new Error(`schema-pg: no PostgreSQL type for ${col.columnType} (${col.table ? getTableConfig(col.table).name : '?'}.${col.name})`);
  }
  if (col.primary) b = b.primaryKey();
  if (col.notNull) b = b.notNull();
  if (col.hasDefault && col.default !== undefined) {
    const d = col.default as unknown;
    b = b.default((typeof d === 'boolean' ? Number(d) : d) as never);
  }
  return b;
}

function derive<T extends SQLiteTable>(table: T): AnyPgTable {
  const done = derived.get(table);
  if (done) return done;
  const config = getTableConfig(table);
  const keyOf = new Map<SQLiteColumn, string>();
  const columns: Record<string, PgColumnBuilderBase> = {};
  for (const [key, col] of Object.entries(getTableColumns(table)) as Array<[string, SQLiteColumn]>) {
    keyOf.set(col, key);
    let b = column(col) as PgColumnBuilderBase & { references: (ref: () => AnyPgColumn, actions: object) => PgColumnBuilderBase };
    const fk = config.foreignKeys.find((f) => f.reference().columns.length === 1 && f.reference().columns[0] === col);
    if (fk) {
      const ref = fk.reference();
      const target = ref.foreignTable as SQLiteTable;
      const targetKey = Object.entries(getTableColumns(target)).find(([, c]) => c === ref.foreignColumns[0])![0];
      b = b.references(() => (derive(target) as unknown as Record<string, AnyPgColumn>)[targetKey]!, { onDelete: fk.onDelete }) as typeof b;
    }
    columns[key] = b;
  }
  const pg = pgTable(config.name, columns, (t) => {
    const cols = t as unknown as Record<string, AnyPgColumn>;
    const pick = (c: SQLiteColumn) => cols[keyOf.get(c)!]!;
    const extras = [];
    for (const pk of config.primaryKeys) {
      const [first, ...rest] = pk.columns.map(pick);
      extras.push(primaryKey({ columns: [first!, ...rest] }));
    }
    for (const ix of config.indexes) {
      // An expression (sql`coalesce(${col}, '')`) is kept as it is: its columns render by name.
      const [first, ...rest] = (ix.config.columns as Array<SQLiteColumn | SQL>).map((c) => (is(c, SQL) ? c : pick(c)));
      let built = (ix.config.unique ? uniqueIndex : index)(ix.config.name).on(first!, ...rest);
      if (ix.config.where) built = built.where(ix.config.where as SQL);
      extras.push(built);
    }
    return extras;
  });
  derived.set(table, pg);
  return pg;
}

export const accounts = derive(sqlite.accounts);
export const apiKeys = derive(sqlite.apiKeys);
export const domains = derive(sqlite.domains);
export const inboxes = derive(sqlite.inboxes);
export const threads = derive(sqlite.threads);
export const messages = derive(sqlite.messages);
export const messageLabels = derive(sqlite.messageLabels);
export const inboxMessageCounts = derive(sqlite.inboxMessageCounts);
export const accountUsage = derive(sqlite.accountUsage);
export const attachments = derive(sqlite.attachments);
export const messageAttachments = derive(sqlite.messageAttachments);
export const idempotencyKeys = derive(sqlite.idempotencyKeys);
export const events = derive(sqlite.events);
export const webhooks = derive(sqlite.webhooks);
export const webhookAttempts = derive(sqlite.webhookAttempts);
export const jobs = derive(sqlite.jobs);
export const spooledMessages = derive(sqlite.spooledMessages);
export const drafts = derive(sqlite.drafts);
export const draftAttachments = derive(sqlite.draftAttachments);
export const listEntries = derive(sqlite.listEntries);
export const auditLog = derive(sqlite.auditLog);
export const suppressions = derive(sqlite.suppressions);
export const addressPolicies = derive(sqlite.addressPolicies);
export const dmarcReports = derive(sqlite.dmarcReports);
export const dmarcRecords = derive(sqlite.dmarcRecords);
export const tlsReports = derive(sqlite.tlsReports);
export const tlsResults = derive(sqlite.tlsResults);
export const mtaStsPolicies = derive(sqlite.mtaStsPolicies);
export const imapMailboxes = derive(sqlite.imapMailboxes);
export const imapUids = derive(sqlite.imapUids);

/** Every SQLite table this file has a PostgreSQL form of (the parity test checks none is missing). */
export function derivedTables(): ReadonlyMap<SQLiteTable, AnyPgTable> {
  return derived;
}
