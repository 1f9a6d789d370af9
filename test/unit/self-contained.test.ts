// The project's tests stand on the project's own files: a clean clone of this repository alone
// must run every test, none skipped because a file beside the checkout (../shared) is absent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

test('no test reads a file outside the repository (../shared and the like)', () => {
  // A path built from the repository root going up, or a literal ../shared/ path.
  const outside = [/\(\s*ROOT\s*,\s*['"]\.\.['"]/, /['"]\.\.['"]\s*,\s*['"]shared['"]/, /\.\.\/shared\//, /\/work\/shared/];
  const offenders: string[] = [];
  for (const file of files(join(ROOT, 'test'))) {
    if (file === import.meta.filename) continue;
    const text = readFileSync(file, 'utf8');
    for (const re of outside) if (re.test(text)) offenders.push(`${relative(ROOT, file)} (${re})`);
  }
  assert.deepEqual(offenders, []);
});
