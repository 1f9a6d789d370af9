// IMAP sequence sets (src/imap/sequence.ts): the messages named, ascending, each once, whatever
// the order and overlap of the ranges; a set past MAX_SET_RANGES ranges is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_SET_RANGES, mergeRanges, resolveSet } from '../../src/imap/sequence.ts';

// Five messages: sequence numbers 1..5, UIDs with gaps.
const uids = [3, 7, 8, 20, 31];

test('sequence numbers: reversed, overlapping and repeated ranges, and *', () => {
  assert.deepEqual(resolveSet('5:3,1,*', uids, false), [3, 8, 20, 31]);
  assert.deepEqual(resolveSet('*:4', uids, false), [20, 31]);
  assert.deepEqual(resolveSet('2,1:2,2:3,3', uids, false), [3, 7, 8]);
  assert.deepEqual(resolveSet('1:*', uids, false), uids);
  assert.deepEqual(resolveSet('4:9,6,100', uids, false), [20, 31]);
  assert.deepEqual(resolveSet('*', [], false), []);
});

test('UIDs: ranges name the UIDs there are, gaps and all', () => {
  assert.deepEqual(resolveSet('20:4,1', uids, true), [7, 8, 20]);
  assert.deepEqual(resolveSet('*:25', uids, true), [31]);
  assert.deepEqual(resolveSet('8,3:3,31:*,9:19', uids, true), [3, 8, 31]);
  assert.deepEqual(resolveSet('32:40', uids, true), []);
  // "*" is the highest UID: 31:* is 31 even when 40 is given.
  assert.deepEqual(resolveSet('40:*', uids, true), [31]);
});

test('not a sequence set: answered as such (long ones cut)', () => {
  assert.equal(resolveSet('0', uids, false), 'not a sequence set: 0');
  assert.equal(resolveSet('1,,2', uids, true), 'not a sequence set: 1,,2');
  assert.equal(resolveSet('1:x', uids, true), 'not a sequence set: 1:x');
  assert.equal(resolveSet(`${'9'.repeat(30)}`, uids, true), `not a sequence set: ${'9'.repeat(30)}`);
  assert.equal(resolveSet(`${'1,'.repeat(100)}x`, uids, true), `not a sequence set: ${'1,'.repeat(50)}...`);
});

test(`at most ${MAX_SET_RANGES} ranges; a hostile set of 100,000 is refused before it is read`, () => {
  const many = (n: number) => Array.from({ length: n }, (_, i) => String(n - i)).join(',');
  assert.equal(resolveSet(many(MAX_SET_RANGES), uids, false).length, 5);
  assert.deepEqual(
    resolveSet(
      many(MAX_SET_RANGES),
      Array.from({ length: 20_000 }, (_, i) => i + 1),
      true,
    ),
    Array.from({ length: MAX_SET_RANGES }, (_, i) => i + 1),
  );
  assert.equal(resolveSet(many(MAX_SET_RANGES + 1), uids, false), `sequence set of ${MAX_SET_RANGES + 1} ranges is over the ${MAX_SET_RANGES} range limit`);
  assert.equal(resolveSet(Array(100_000).fill('1').join(','), uids, true), `sequence set of 100000 ranges is over the ${MAX_SET_RANGES} range limit`);
});

test('ranges merged: sorted, overlapping and adjacent ones joined', () => {
  assert.deepEqual(
    mergeRanges([
      [5, 9],
      [1, 1],
      [2, 3],
      [8, 12],
      [20, 20],
      [14, 15],
    ]),
    [
      [1, 3],
      [5, 12],
      [14, 15],
      [20, 20],
    ],
  );
});

test('the same messages as testing each against every range', () => {
  const folder = Array.from({ length: 60 }, (_, i) => i * 2 + 1);
  let seed = 7;
  const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  for (let round = 0; round < 300; round++) {
    const byUid = round % 2 === 0;
    const parts = Array.from({ length: 1 + rnd(6) }, () => {
      const end = () => (rnd(8) === 0 ? '*' : String(1 + rnd(byUid ? 125 : 64)));
      return rnd(3) === 0 ? end() : `${end()}:${end()}`;
    });
    const last = byUid ? folder[folder.length - 1] : folder.length;
    const ranges = parts.map((p) => p.split(':').map((x) => (x === '*' ? last : Number(x))));
    const want = folder.filter((u, i) => ranges.some((r) => (byUid ? u : i + 1) >= Math.min(...r) && (byUid ? u : i + 1) <= Math.max(...r)));
    assert.deepEqual(resolveSet(parts.join(','), folder, byUid), want, parts.join(','));
  }
});
