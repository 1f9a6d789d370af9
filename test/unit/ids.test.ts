// Ids (PRODUCT.md): a type prefix and a time-ordered opaque tail; unique across the random pool's
// refills and ordered within one millisecond.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newId, randomToken } from '../../src/ids.ts';

test('ids carry their prefix, sort by creation time and do not repeat across pool refills', () => {
  const ids = Array.from({ length: 5_000 }, (_v, i) => newId('msg', 1_700_000_000_000 + Math.floor(i / 100)));
  for (const id of ids) assert.match(id, /^msg_[0-9a-hjkmnp-tv-z]{26}$/);
  assert.equal(new Set(ids).size, ids.length, 'no id repeats (13 random characters each, 5,000 ids span many 4 KB pool refills)');
  assert.deepEqual([...ids].sort(), ids, 'ids made later sort later, also within one millisecond');
  const tails = new Set(ids.map((id) => id.slice(-13)));
  assert.equal(tails.size, ids.length, 'the random part alone is unique');
  assert.notEqual(newId('job', 5).slice(-13), newId('job', 5).slice(-13));
});

test('random tokens use the id alphabet', () => {
  const t = randomToken(24);
  assert.match(t, /^[0-9a-hjkmnp-tv-z]{24}$/);
  assert.notEqual(randomToken(24), t);
});
