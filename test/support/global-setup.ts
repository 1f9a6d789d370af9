// The test runner's global setup (build/test.sh: --test-global-setup): initdb once for the
// whole pass, with a migrated database test servers' databases are copied from. Each test file still starts a PostgreSQL cluster of its own (postgres.ts), from a
// copy of this data directory: one initdb per file was most of a cluster's start. Clusters
// stay one per file because event visibility follows the oldest transaction running anywhere
// in a cluster (store/repo/events.ts), so one file's long transaction would hold back another's
// events. Without PostgreSQL installed nothing is made: the files that need it say so (peers.ts).
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { initTemplate, postgresMissing, TEMPLATE_ENV } from './postgres.ts';

let template: string | undefined;

export async function globalSetup(): Promise<void> {
  if (postgresMissing()) return;
  template = await initTemplate();
  process.env[TEMPLATE_ENV] = template;
}

export function globalTeardown(): void {
  if (template) rmSync(dirname(template), { recursive: true, force: true });
}
