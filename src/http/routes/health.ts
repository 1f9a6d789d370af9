// GET /health: liveness without authentication (also checks the database answers).
import type { AppContext } from '../../context.ts';
import type { Routes } from '../routes.ts';

export function registerHealthRoutes(r: Routes, ctx: AppContext): void {
  r.get(
    '/health',
    () => {
      ctx.db.$client.prepare('SELECT 1').get();
      return { status: 200, body: { status: 'ok' } };
    },
    { public: true },
  );
}
