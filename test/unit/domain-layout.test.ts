// SQL only in src/store: the domain (src/domain/) holds the database handle as the opaque Tx of
// src/store/store.ts, never as drizzle's, and imports nothing of drizzle's.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Tx } from '../../src/store/client.ts';

const DOMAIN = new URL('../../src/domain/', import.meta.url).pathname;

/** Every import (static, type-only or dynamic) of each domain file: [file, specifier, imported names]. */
function domainImports(): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  for (const rel of readdirSync(DOMAIN, { recursive: true, encoding: 'utf8' })) {
    if (!rel.endsWith('.ts')) continue;
    const source = readFileSync(join(DOMAIN, rel), 'utf8');
    for (const m of source.matchAll(/import\s+(?:type\s+)?([^'";]*?)\s*from\s*'([^']+)'|import\(\s*'([^']+)'\s*\)/g)) out.push([rel, m[2] ?? m[3]!, m[1] ?? '']);
  }
  return out;
}

test('no domain file imports drizzle-orm or the store-side Db type', () => {
  const imports = domainImports();
  assert.ok(imports.length > 100, 'the scan sees the domain files');
  assert.deepEqual(
    imports.filter(([, spec]) => spec.startsWith('drizzle-orm')),
    [],
  );
  // src/store/store.ts's Db is drizzle's handle; the domain's (src/store/client.ts) is opaque.
  assert.deepEqual(
    imports.filter(([, spec, names]) => spec.endsWith('/store/store.ts') && /\bDb\b|SqliteRemoteDatabase/.test(names)),
    [],
  );
});

// Compile-time: `npx tsc --noEmit` fails if the handle the domain holds ever has a query builder
// again (the expected errors below would be unused). Never called.
export function domainHandleHasNoQueryBuilder(tx: Tx): void {
  // @ts-expect-error: no select() on the domain's handle
  void tx.select();
  // @ts-expect-error: nor run raw SQL through it
  void tx.run();
}
