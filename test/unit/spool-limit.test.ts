// How many spooled messages are processed at once (src/domain/inbound/spool.ts): one at a time
// only during a burst whose oldest message has waited under a second; otherwise the runner's
// full concurrency, so a steady flow is not kept behind its own 250s.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spoolLimitFor } from '../../src/domain/inbound/spool.ts';

const base = { spooling: true, depth: 500, oldestWaitMs: 200, spoolLimit: 20_000, concurrency: 32 };

test('a fresh burst is processed one message at a time, so accepting keeps the CPU', () => {
  assert.equal(spoolLimitFor(base), 1);
});

test('once the oldest spooled message has waited a second, the spool is worked off at full concurrency', () => {
  assert.equal(spoolLimitFor({ ...base, oldestWaitMs: 1000 }), 32);
  assert.equal(spoolLimitFor({ ...base, oldestWaitMs: 5000 }), 32);
});

test('a wait not known (spooled before a restart, or by another node) counts as long', () => {
  assert.equal(spoolLimitFor({ ...base, oldestWaitMs: Infinity }), 32);
});

test('a short queue, a spool half full, or the end of the burst: full concurrency', () => {
  assert.equal(spoolLimitFor({ ...base, depth: 63 }), 32);
  assert.equal(spoolLimitFor({ ...base, depth: 64 }), 1);
  assert.equal(spoolLimitFor({ ...base, depth: 10_000 }), 32);
  assert.equal(spoolLimitFor({ ...base, spooling: false }), 32);
});
