// The metrics listener: GET /metrics in the Prometheus text format on its own address
// (`metrics.listen`, off when empty), so scrapes never need an API key and the numbers are
// never reachable on the public API port. Anything else on that address is 404.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AppContext } from '../context.ts';
import { errorFields } from '../log.ts';
import type { Service } from '../context.ts';
import { METRICS_CONTENT_TYPE, renderMetrics } from '../metrics.ts';

export function createMetricsService(ctx: AppContext): Service & { port: number } {
  let server: Server | undefined;
  const service = {
    name: 'metrics',
    port: 0,
    async start() {
      const addr = ctx.config.metrics.listen;
      if (!addr) return;
      server = createServer((req, res) => {
        const path = (req.url ?? '/').split('?')[0];
        if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
          res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
          res.end('not found: metrics are at GET /metrics\n');
          return;
        }
        renderMetrics(ctx).then(
          (body) => {
            res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Cache-Control': 'no-store' });
            res.end(req.method === 'HEAD' ? undefined : body);
          },
          (err) => {
            ctx.log.error('metrics scrape failed', errorFields(err));
            res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
            res.end('metrics unavailable\n');
          },
        );
      });
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(addr.port, addr.host, () => {
          server!.off('error', reject);
          resolve();
        });
      });
      service.port = (server.address() as AddressInfo).port;
      ctx.log.info('metrics listening', { address: `${addr.host}:${service.port}` });
    },
    async stop() {
      if (!server) return;
      const s = server;
      server = undefined;
      await new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      });
    },
  };
  return service;
}
