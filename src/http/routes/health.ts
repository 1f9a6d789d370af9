// GET /health: liveness without authentication (also checks the database answers).
import type { AppContext } from '../../context.ts';
import type { Routes } from '../routes.ts';

export function registerHealthRoutes(r: Routes, ctx: AppContext): void {
  r.get(
    '/health',
    async () => {
      await ctx.store.ping();
      return { status: 200, body: { status: 'ok' } };
    },
    { public: true },
  );
}
