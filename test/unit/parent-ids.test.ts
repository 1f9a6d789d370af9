// The parents a message names (In-Reply-To, References: src/domain/mail/threads.ts): in order,
// each once, and bounded, since a hostile message can name hundreds of thousands.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_PARENT_IDS, messageIdsIn } from '../../src/domain/mail/threads.ts';

test('Message-IDs in order, each once, from strings and lists; text around them ignored', () => {
  assert.deepEqual(messageIdsIn('<a@x> junk <b@x>\r\n <a@x>', ['<c@x>', '<b@x>'], null, undefined, '<d@x>'), ['<a@x>', '<b@x>', '<c@x>', '<d@x>']);
  assert.deepEqual(messageIdsIn('no ids here', '<>', `<${'x'.repeat(901)}>`), []);
});

test(`past ${MAX_PARENT_IDS}: the first (the thread's root) and the newest, the In-Reply-To given last among them`, () => {
  const refs = Array.from({ length: 50_000 }, (_, i) => `<id-${i}@example.org>`);
  const ids = messageIdsIn(refs.join('\r\n '), '<parent@example.org>');
  assert.equal(ids.length, MAX_PARENT_IDS);
  assert.deepEqual(ids, [refs[0], ...refs.slice(refs.length - MAX_PARENT_IDS + 2), '<parent@example.org>']);
  // Repeats do not count against the bound.
  assert.deepEqual(messageIdsIn(Array.from({ length: 10_000 }, () => '<same@x>').join(' '), '<other@x>'), ['<same@x>', '<other@x>']);
});
