// Baseline: bare @tinyhttp/app + better-sqlite3 serving the same three endpoints as the
// mailroom HTTP scenario (no auth, no rate limit, no logging). Prints "listening <port>".
import { App } from '@tinyhttp/app';
import { createServer } from 'node:http';
import { openRowStore } from './sqlite-rows.ts';

const store = openRowStore();
const app = new App();
const send = (res: any, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify(body));
};
app.get('/inboxes/:id', (req, res) => {
  const row = store.getInbox(req.params.id);
  send(res, row ? 200 : 404, row ?? { error: 'not found' });
});
app.get('/inboxes/:id/messages', (req, res) => {
  const q = new URL(req.url, 'http://x').searchParams;
  const limit = Number(q.get('limit') ?? 20);
  const offset = Number(q.get('offset') ?? 0);
  send(res, 200, { data: store.listMessages(req.params.id, limit, offset), limit, offset });
});
app.post('/inboxes', (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { displayName?: string };
    send(res, 201, store.createInbox(body.displayName ?? null));
  });
});
const server = createServer((req, res) => app.attach(req as never, res as never));
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as { port: number }).port} ${store.inboxId}\n`));
process.on('SIGTERM', () => process.exit(0));
