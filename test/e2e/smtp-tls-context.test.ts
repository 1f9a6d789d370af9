// The SMTP listeners build a TLS context only when they offer STARTTLS (src/smtp/listener.ts):
// smtp-server built one with its own certificate in its constructor, loading Node's tls module
// and its root certificates in every idle server, for a STARTTLS both listeners disable without
// tls_cert and tls_key. STARTTLS with a certificate is inbound.test.ts's and submission.test.ts's.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSmtp, createSmtpServer } from '../../src/smtp/listener.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { SmtpClient } from '../support/smtp-client.ts';

let t: TestServer;

before(async () => {
  t = await startTestServer();
});

after(async () => {
  await t.close();
});

test('without tls_cert and tls_key the SMTP server holds no TLS context, and STARTTLS is not offered', async () => {
  const server = createSmtpServer(t.server.ctx, undefined, { disabledCommands: ['STARTTLS'] });
  try {
    assert.equal(server.secureContext.size, 0);
    // Its certificate update, as a renewal would call it, builds none either.
    server.updateSecureContext({});
    assert.equal(server.secureContext.size, 0);
  } finally {
    await closeSmtp(server);
  }
  const { client } = await SmtpClient.open(t.server.smtpPort);
  const ehlo = await client.cmd('EHLO tester.example');
  assert.doesNotMatch(ehlo.text, /STARTTLS/);
  assert.equal((await client.cmd('STARTTLS')).code, 500);
  await client.quit();
});
