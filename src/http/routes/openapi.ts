// GET /openapi.json (no key): the OpenAPI 3.1 document of every registered route, built once
// on first request from the route registry and the request schemas (see ../openapi.ts).
import type { AppContext } from '../../context.ts';
import type { Routes } from '../routes.ts';

export function registerOpenApiRoutes(r: Routes, ctx: AppContext): void {
  let doc: unknown;
  r.get(
    '/openapi.json',
    async () => {
      // Built lazily: every module has registered its routes by the time a request arrives.
      // The builder itself is loaded then too, not at start-up (it is only needed here).
      if (doc === undefined) {
        const { buildOpenApi } = await import('../openapi.ts');
        doc ??= buildOpenApi(r.registered, ctx.config.http.public_url);
      }
      return { status: 200, body: doc };
    },
    { public: true },
  );
}
