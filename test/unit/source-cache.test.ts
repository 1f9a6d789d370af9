// The in-memory copy of a source just written for its first delivery attempt
// (src/outbound/source-cache.ts): taken once, then the stored file is read; bounded in size;
// never kept where no attempt would take it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configFrom } from '../../src/config.ts';
import { closeContext, createContext, type AppContext } from '../../src/context.ts';
import { silentLogger } from '../../src/log.ts';
import { keepSource, readSource } from '../../src/outbound/source-cache.ts';

async function withContext(extra: Record<string, unknown>, fn: (ctx: AppContext) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-source-cache-'));
  const ctx = await createContext(configFrom({ data_dir: dir, ...extra }), silentLogger);
  try {
    await fn(ctx);
  } finally {
    await closeContext(ctx);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Stores `kept` as the source and keeps it, then puts other bytes in the file: a read tells which it got. */
async function keptThenChanged(ctx: AppContext, path: string, kept: Buffer): Promise<void> {
  await ctx.blobs.write(path, kept);
  keepSource(ctx, path, kept);
  await ctx.blobs.write(path, 'from the file');
}

test('the first read of a kept source comes from memory, the next from the stored file', async () => {
  await withContext({ outbound: { mode: 'email' } }, async (ctx) => {
    await keptThenChanged(ctx, 'raw/a.eml', Buffer.from('from memory'));
    assert.equal((await readSource(ctx, 'raw/a.eml')).toString(), 'from memory');
    assert.equal((await readSource(ctx, 'raw/a.eml')).toString(), 'from the file');
  });
});

test('large sources, and every source of a dry run, are not kept', async () => {
  await withContext({ outbound: { mode: 'email' } }, async (ctx) => {
    await keptThenChanged(ctx, 'raw/large.eml', Buffer.alloc(300 * 1024, 'x'));
    assert.equal((await readSource(ctx, 'raw/large.eml')).toString(), 'from the file');
  });
  await withContext({ outbound: { mode: 'dry-run' } }, async (ctx) => {
    await keptThenChanged(ctx, 'raw/dry.eml', Buffer.from('from memory'));
    assert.equal((await readSource(ctx, 'raw/dry.eml')).toString(), 'from the file');
  });
});

test('past its byte budget the oldest sources are let go', async () => {
  await withContext({ outbound: { mode: 'email' } }, async (ctx) => {
    // 40 sources of 250 KB: 10 MB, past the 8 MB the cache holds.
    for (let i = 0; i < 40; i++) await keptThenChanged(ctx, `raw/${i}.eml`, Buffer.alloc(250 * 1024, String(i % 10)));
    assert.equal((await readSource(ctx, 'raw/0.eml')).toString(), 'from the file');
    assert.equal((await readSource(ctx, 'raw/39.eml'))[0], '9'.charCodeAt(0));
  });
});
