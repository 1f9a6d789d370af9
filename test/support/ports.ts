// Free loopback ports. Its own module, without imports from src/: test/support/postgres.ts uses
// it from the test runner's global setup, which node loads without tsx (type stripping only).
import { createServer } from 'node:net';

/** A port free right now on 127.0.0.1 (bound and released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
