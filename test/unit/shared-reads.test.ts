// sharedReads (src/store/store.ts): the keys asked for in one turn of the event loop are read
// together, each once; each caller gets its own key's value; a failed read fails every caller of
// its turn, and the next turn reads again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sharedReads } from '../../src/store/store.ts';

test('callers of one turn share one read of their distinct keys; the next turn reads again', async () => {
  const calls: string[][] = [];
  const read = sharedReads(async (keys: string[]) => {
    calls.push(keys);
    return new Map(keys.filter((k) => k !== 'gone').map((k) => [k, k.toUpperCase()]));
  });
  assert.deepEqual(await Promise.all([read('a'), read('b'), read('a'), read('gone')]), ['A', 'B', 'A', undefined]);
  assert.deepEqual(calls, [['a', 'b', 'gone']]);
  // Asked from continuations of the same turn (after awaits that need no I/O): still together.
  const later = async (k: string) => {
    await Promise.resolve();
    await Promise.resolve();
    return read(k);
  };
  assert.deepEqual(await Promise.all([read('c'), later('d')]), ['C', 'D']);
  assert.deepEqual(calls[1], ['c', 'd']);
  assert.equal(await read('e'), 'E');
  assert.equal(calls.length, 3);
});

test('a failed read fails every caller of its turn, and the next turn reads again', async () => {
  let fail = true;
  const read = sharedReads(async (keys: number[]) => {
    if (fail) throw new Error('connection lost');
    return new Map(keys.map((k) => [k, k * 2]));
  });
  const results = await Promise.allSettled([read(1), read(2)]);
  assert.ok(results.every((r) => r.status === 'rejected' && /connection lost/.test(String(r.reason))));
  fail = false;
  assert.equal(await read(2), 4);
});
