// The memory of rows read on every request or message (src/domain/remembered.ts): its budget
// (the oldest go; a value heavier than the whole budget is not kept), its age limit, reads begun
// before an emptying, and commits made by another process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Remembered, TTL_MS } from '../../src/domain/remembered.ts';

test('past its budget the oldest entries go, and a value heavier than the budget is not kept', () => {
  const m = new Remembered<string[]>(
    () => false,
    10,
    (v) => v.length + 1,
  );
  m.put('a', ['1', '2', '3'], m.generation, 0); // weight 4
  m.put('b', ['1', '2'], m.generation, 0); // 3: 7 in all
  m.put('c', ['1', '2', '3', '4'], m.generation, 0); // 5: 'a' goes (12 - 4 = 8)
  assert.equal(m.get('a', 1), undefined);
  assert.deepEqual(m.get('b', 1), ['1', '2']);
  assert.deepEqual(m.get('c', 1), ['1', '2', '3', '4']);
  // Put again, a key is counted once.
  m.put('b', ['1'], m.generation, 1);
  m.put('d', ['1'], m.generation, 1); // 5 + 2 + 2 = 9
  assert.deepEqual(m.get('c', 2), ['1', '2', '3', '4']);
  m.put('huge', Array.from({ length: 10 }, String), m.generation, 2);
  assert.equal(m.get('huge', 3), undefined, 'a value heavier than the budget was kept');
  assert.deepEqual(m.get('d', 3), ['1'], 'a value too heavy to keep pushed others out');
});

test('an entry is trusted for TTL_MS, a read begun before an emptying is not kept, commits elsewhere empty it', () => {
  let elsewhere = false;
  const m = new Remembered<number>(() => elsewhere, 100);
  m.put('k', 1, m.generation, 1_000);
  assert.equal(m.get('k', 1_000 + TTL_MS - 1), 1);
  assert.equal(m.get('k', 1_000 + TTL_MS), undefined);
  const before = m.generation;
  m.clear();
  m.put('k', 2, before, 5_000);
  assert.equal(m.get('k', 5_001), undefined, 'a read from before the emptying was kept');
  m.put('k', 3, m.generation, 5_000);
  assert.equal(m.current(), m.generation);
  elsewhere = true;
  const g = m.generation;
  assert.notEqual(m.current(), g, 'a commit by another process did not empty the memory');
  assert.equal(m.get('k', 5_001), undefined);
});
