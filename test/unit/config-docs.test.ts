import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { renderBudgetsTable, renderConfigDocs, typeOf, withBudgetsTable } from '../../build/config-docs.ts';
import { BUDGETS, configKeys } from '../../src/config.ts';

test('docs/configuration.md is what the config schema renders (run `npm run docs:config`)', () => {
  const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
  assert.equal(page, renderConfigDocs(), 'docs/configuration.md is stale: run `npm run docs:config`');
});

test('every config key is on the page with its default, description and a type', () => {
  const page = renderConfigDocs();
  for (const { key, field } of configKeys()) {
    const row = page.split('\n').find((l) => l.startsWith(`| \`${key}\` |`));
    assert.ok(row, `no row for ${key}`);
    assert.ok(row.includes(`\`${field.example.replaceAll('|', '\\|')}\``), `${key}: default missing`);
    assert.ok(row.includes(field.description.replaceAll('|', '\\|')), `${key}: description missing`);
    assert.ok(typeOf(key, field).length > 0);
  }
});

test('types are read from the schema, not guessed', () => {
  const t = (k: string) => typeOf(k, configKeys().find((e) => e.key === k)!.field);
  assert.equal(t('outbound.mode'), 'one of `"email"`, `"dry-run"`');
  assert.equal(t('smtp.inline_processing'), 'integer ≥ 0');
  assert.equal(t('retention.events'), 'duration, at least `7d`');
  assert.equal(t('outbound.retry_schedule'), 'list of durations (at least one)');
  assert.equal(t('metrics.listen'), 'listen address (`"host:port"`), or `""` for off');
  assert.equal(t('http.listen'), 'listen address (`"host:port"`)');
  assert.equal(t('webhooks.allow_insecure_targets'), 'boolean');
  assert.equal(t('hostname'), 'DNS host name');
  assert.equal(t('http.public_url'), 'absolute `http://` or `https://` URL (no query, fragment or credentials)');
  assert.equal(t('outbound.relay'), 'string');
});

test('docs/security.md carries the budgets table BUDGETS renders (run `npm run docs:config`)', () => {
  const page = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
  assert.equal(page, withBudgetsTable(page), 'docs/security.md budgets table is stale: run `npm run docs:config`');
  const table = renderBudgetsTable();
  const keys = new Set(configKeys().map((e) => e.key));
  for (const key of Object.keys(BUDGETS)) {
    assert.ok(keys.has(key), `BUDGETS names ${key}, which is no config key`);
    assert.ok(table.includes(`| \`${key}\` |`), `no row for ${key}`);
  }
});
