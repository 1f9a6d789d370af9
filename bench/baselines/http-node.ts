// Baseline: bare node:http + better-sqlite3 serving the same three endpoints with a hand-written
// router: the floor for any Node HTTP server on this machine. Prints "listening <port>".
import { createServer } from 'node:http';
import { openRowStore } from './sqlite-rows.ts';

const store = openRowStore();
const server = createServer((req, res) => {
  const send = (status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify(body));
  };
  const url = new URL(req.url ?? '/', 'http://x');
  const parts = url.pathname.split('/');
  if (req.method === 'GET' && parts.length === 3 && parts[1] === 'inboxes') {
    const row = store.getInbox(parts[2]);
    return send(row ? 200 : 404, row ?? { error: 'not found' });
  }
  if (req.method === 'GET' && parts.length === 4 && parts[1] === 'inboxes' && parts[3] === 'messages') {
    const limit = Number(url.searchParams.get('limit') ?? 20);
    const offset = Number(url.searchParams.get('offset') ?? 0);
    return send(200, { data: store.listMessages(parts[2], limit, offset), limit, offset });
  }
  if (req.method === 'POST' && url.pathname === '/inboxes') {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { displayName?: string };
      send(201, store.createInbox(body.displayName ?? null));
    });
    return;
  }
  send(404, { error: 'not found' });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as { port: number }).port} ${store.inboxId}\n`));
process.on('SIGTERM', () => process.exit(0));
