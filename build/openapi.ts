// npm run openapi: writes openapi.json at the repository root from the same route registry and
// request schemas the server uses (a test fails when the committed file is stale).
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { configFrom } from '../src/config.ts';
import { closeContext, createContext } from '../src/context.ts';
import { createHttpApp } from '../src/http/app.ts';
import { buildOpenApi } from '../src/http/openapi.ts';
import type { RegisteredRoute } from '../src/http/routes.ts';
import { silentLogger } from '../src/log.ts';

/** The document as committed: built on a throw-away data dir, for the default public_url. */
export async function generateOpenApi(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-openapi-'));
  const ctx = await createContext(configFrom({ data_dir: dir }), silentLogger);
  try {
    const app = createHttpApp(ctx);
    return JSON.stringify(buildOpenApi(app.locals.routes as RegisteredRoute[], ctx.config.http.public_url), null, 2) + '\n';
  } finally {
    await closeContext(ctx);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const out = join(import.meta.dirname, '..', 'openapi.json');
  writeFileSync(out, await generateOpenApi());
  process.stdout.write(`wrote ${out}\n`);
}
