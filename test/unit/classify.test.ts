// The reply classification table: which remote answers are retried and which bounce.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { classifyReply } from '../../src/outbound/classify.ts';

const cases: Array<[string, Parameters<typeof classifyReply>[0], 'retry' | 'bounce', string]> = [
  ['unknown user', { code: 550, response: '550 5.1.1 <x@y>: Recipient address rejected: User unknown' }, 'bounce', 'unknown-user'],
  ['plain 5xx', { code: 554, response: '554 Transaction failed' }, 'bounce', 'rejected'],
  ['policy', { code: 550, response: '550 5.7.1 Message rejected as spam' }, 'bounce', 'policy'],
  ['disabled mailbox', { code: 550, response: '550 5.2.1 mailbox disabled, not accepting messages' }, 'bounce', 'mailbox-disabled'],
  ['too large', { code: 552, response: '552 5.3.4 Message size exceeds fixed limit' }, 'bounce', 'message-too-large'],
  ['plain 4xx', { code: 451, response: '451 4.3.0 local error' }, 'retry', 'deferred'],
  ['greylisting with a 4xx', { code: 450, response: '450 4.2.0 Greylisted, see http://postgrey' }, 'retry', 'greylisted'],
  ['greylisting sent as 5xx', { code: 550, response: '550 greylisted, come back later' }, 'retry', 'greylisted'],
  ['rate limit sent as 5xx', { code: 550, response: '550 5.7.1 Too many messages, try again later' }, 'retry', 'rate-limited'],
  ['mailbox full sent as 5xx (RFC 3463 X.2.2)', { code: 552, response: '552 5.2.2 Mailbox full' }, 'retry', 'mailbox-full'],
  ['connection refused', { errorCode: 'ECONNECTION', response: 'connect ECONNREFUSED' }, 'retry', 'network'],
  ['timeout', { errorCode: 'ETIMEDOUT' }, 'retry', 'network'],
  ['TLS failure', { errorCode: 'ETLS' }, 'retry', 'network'],
  ['unexpected 2xx where a rejection was expected', { code: 250, response: '250 ok' }, 'retry', 'unexpected'],
  ['nothing at all', {}, 'retry', 'network'],
];

for (const [name, input, action, category] of cases) {
  test(`classify: ${name}`, () => {
    assert.deepEqual(classifyReply(input), { action, category });
  });
}
