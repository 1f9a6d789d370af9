import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { PAGE_FILE, readResults, renderResults, withResults } from '../../build/performance-docs.ts';
import { TARGETS } from '../../bench/targets.ts';

test('docs/performance.md carries the tables bench/results/latest.json renders (run `npm run docs:performance`)', () => {
  const page = readFileSync(PAGE_FILE, 'utf8');
  assert.equal(page, withResults(page, readResults()), 'docs/performance.md is stale: run `npm run docs:performance`');
});

test('every scenario of bench/results/latest.json says when, on what and under what load it ran', () => {
  for (const s of readResults().scenarios) {
    if (s.status === 'skipped') continue;
    assert.match(s.measuredAt ?? '', /^\d{4}-\d\d-\d\dT/, `${s.id}: no date`);
    assert.ok(s.machine?.cpuModel && s.machine.cpus > 0, `${s.id}: no machine`);
    assert.equal(s.loadBefore?.length, 3, `${s.id}: no load average`);
  }
});

test('every note of bench/results/latest.json is text (a partial bench run reads them all)', () => {
  for (const [i, n] of (readResults().notes ?? []).entries()) assert.equal(typeof n, 'string', `note ${i} is ${JSON.stringify(n)}`);
});

test('every target in the results is one of bench/targets.ts', () => {
  const known = new Set(Object.values(TARGETS).map((t) => t.text));
  for (const s of readResults().scenarios) for (const r of s.rows) if (r.target) assert.ok(known.has(r.target), `${s.id} "${r.metric}": target "${r.target}" is not in bench/targets.ts`);
});

test('the rendered results have no figure without its scenario and the page nothing outside the markers that the renderer writes', () => {
  const rendered = renderResults(readResults());
  assert.ok(!rendered.includes('####'));
  const page = readFileSync(PAGE_FILE, 'utf8');
  // Result tables (the renderer's header) appear only inside the generated part.
  const header = '| metric | mailroom | baseline | baseline value | ratio | target | note |';
  assert.equal(page.split(header).length - 1, rendered.split(header).length - 1, 'a results table outside the generated part: it would not follow the results');
});
