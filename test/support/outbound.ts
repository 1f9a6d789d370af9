// Outbound test rig: a dns2 server that answers `remote.test` with an MX on loopback, a capturing
// MX (test/support/mx.ts) there, and the real server sending to it (outbound mode "email", short
// retry schedule). `captured` reads back what the MX received for one Message-ID.
import { simpleParser, type ParsedMail } from 'mailparser';
import type { Clock } from '../../src/context.ts';
import { startTestDns, type TestDns } from './dns.ts';
import { startTestMx, type TestMx } from './mx.ts';
import { startTestServer, type Overrides, type TestServer } from './server.ts';
import { until } from './wait.ts';

export interface OutboundRig {
  dns: TestDns;
  mx: TestMx;
  /** Starts (or, after a stop, restarts) the server; `dataDir` keeps the same database. */
  start(opts?: { clock?: Clock; dataDir?: string; overrides?: Overrides }): Promise<TestServer>;
  /** The parsed message the MX received with this Message-ID (waits for it). */
  captured(messageIdHeader: string): Promise<ParsedMail>;
  close(): Promise<void>;
}

export async function startOutboundRig(): Promise<OutboundRig> {
  const dns = await startTestDns();
  const mx = await startTestMx();
  dns.set('remote.test', [{ type: 'MX', exchange: 'mx.remote.test', priority: 10 }]);
  dns.set('mx.remote.test', [{ type: 'A', address: '127.0.0.1' }]);
  return {
    dns,
    mx,
    start: ({ clock, dataDir, overrides = {} } = {}) =>
      startTestServer(
        {
          outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['200ms'], timeout: '5s' },
          dns: { servers: [dns.server], timeout: '1s' },
          limits: { requests_per_minute: 100_000 },
          ...overrides,
        },
        { clock, dataDir },
      ),
    async captured(messageIdHeader) {
      const found = await until(`capture of ${messageIdHeader}`, () => mx.messages.find((m) => m.raw.includes(`Message-ID: ${messageIdHeader}`)));
      return simpleParser(found.raw);
    },
    async close() {
      await mx.close();
      await dns.close();
    },
  };
}
