// Failure paths a code review found (issue 27): each test fails on the code before its fix.
// Deleted webhooks' queued retries, control characters decoded from encoded words, and the
// storage/job/database failure paths below.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startReceiver } from '../support/receiver.ts';
import { startTestServer } from '../support/server.ts';
import { emitEvent } from '../support/events.ts';
import { until } from '../support/wait.ts';
import { listJobs } from '../../src/jobs/table.ts';

test('a deleted webhook receives no queued retry: the retry is dropped and logged with the reason', async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: { allow_insecure_targets: true, retry_schedule: ['200ms', '200ms'], timeout: '2s' } });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/gone` })).body;
    rx.script(503);
    await emitEvent(t.server.ctx, t.accountId, 'message.delivered', { id: 'msg_before_delete' });
    await rx.waitFor(1);
    assert.equal((await t.api('DELETE', `/webhooks/${w.id}`)).status, 204);
    const logs = await until('the retry to be dropped', async () => {
      const l = (await t.api('GET', `/webhooks/logs?webhookId=${w.id}`)).body.data as any[];
      return l.length === 2 ? l : undefined;
    });
    assert.deepEqual(logs.map((e) => [e.attempt, e.status, e.httpStatus, e.error]), [
      [2, 'failed', null, 'webhook deleted: delivery dropped'],
      [1, 'failed', 503, 'HTTP 503'],
    ]);
    assert.equal((await listJobs(t.server.ctx, ['queued', 'running'])).length, 0, 'no retry left queued');
    assert.equal(rx.received.length, 1, 'the receiver got nothing after the deletion');
  } finally {
    await t.close();
    await rx.close();
  }
});
