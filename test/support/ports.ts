// Free loopback ports. Its own module, without imports from src/: test/support/postgres.ts uses
// it from the test runner's global setup, which loads no more of the project than it needs.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * Where ports are picked: below the kernel's ephemeral range, from which every outgoing
 * connection and every port-0 listener takes its port. A port from inside it, free when picked,
 * was at times taken by another test's connection before a restarted child server bound it again
 * (EADDRINUSE), more often the more test files run at once.
 */
const BELOW = (() => {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  } catch {
    return 0;
  }
})();
const LOWEST = 10_000;

/** Binds `port` on 127.0.0.1 (0: any) and releases it; answers the port, or null when taken. */
function tryPort(port: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(null) : reject(err)));
    s.listen(port, '127.0.0.1', () => {
      const bound = (s.address() as { port: number }).port;
      s.close(() => resolve(bound));
    });
  });
}

/** A port free right now on 127.0.0.1 (bound and released), outside the ephemeral range when there is room below it. */
export async function freePort(): Promise<number> {
  if (BELOW - LOWEST >= 1000) {
    for (let i = 0; i < 20; i++) {
      const port = await tryPort(LOWEST + Math.floor(Math.random() * (BELOW - LOWEST)));
      if (port !== null) return port;
    }
  }
  return (await tryPort(0))!;
}
