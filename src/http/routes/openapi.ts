// GET /openapi.json (no key): the OpenAPI 3.1 document of every registered route, built once
// on first request from the route registry and the request schemas (see ../openapi.ts).
import type { AppContext } from '../../context.ts';
import { buildOpenApi } from '../openapi.ts';
import type { Routes } from '../routes.ts';

export function registerOpenApiRoutes(r: Routes, ctx: AppContext): void {
  let doc: unknown;
  r.get(
    '/openapi.json',
    () => {
      // Built lazily: every module has registered its routes by the time a request arrives.
      doc ??= buildOpenApi(r.registered, ctx.config.http.public_url);
      return { status: 200, body: doc };
    },
    { public: true },
  );
}
