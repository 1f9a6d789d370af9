// An MTA-STS policy server on loopback: HTTPS with certificates of a test CA, serving
// /.well-known/mta-sts.txt per host name (SNI and Host), each policy replaceable at any time.
// It also takes POSTs (TLS-RPT reports sent over https) and keeps them.
import { createServer, type Server } from 'node:https';
import { createSecureContext } from 'node:tls';
import type { TestCa } from './test-ca.ts';

export interface TestPolicyServer {
  port: number;
  /** Serves `text` for https://mta-sts.<domain>/.well-known/mta-sts.txt (a certificate for it is issued). */
  serve(domain: string, text: string): void;
  /** Never answers the policy request of `domain` (the client's time limit ends it). */
  stall(domain: string): void;
  /** Stops serving the policy of `domain` (404). */
  withdraw(domain: string): void;
  /** Presents a certificate for `host` from now on (for POST targets). */
  certify(host: string): void;
  /** POST requests received, with their bodies. */
  posts: Array<{ host: string; path: string; contentType: string; body: Buffer }>;
  /** Requests seen, as host names. */
  fetches: string[];
  close(): Promise<void>;
}

export async function startPolicyServer(ca: TestCa): Promise<TestPolicyServer> {
  const policies = new Map<string, string>();
  const contexts = new Map<string, ReturnType<typeof createSecureContext>>();
  const fetches: string[] = [];
  const posts: TestPolicyServer['posts'] = [];
  const stalled = new Set<string>();
  const fallback = ca.issue(['policy-server.invalid']);
  const server: Server = createServer(
    {
      ...fallback,
      SNICallback: (name, cb) => cb(null, contexts.get(name.toLowerCase()) ?? createSecureContext(fallback)),
    },
    (req, res) => {
      const host = String(req.headers.host ?? '')
        .replace(/:\d+$/, '')
        .toLowerCase();
      if (req.method === 'POST') {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          posts.push({ host, path: req.url ?? '', contentType: String(req.headers['content-type']), body: Buffer.concat(chunks) });
          res.writeHead(200).end();
        });
        return;
      }
      fetches.push(host);
      if (stalled.has(host)) return; // closed by close()
      const policy = policies.get(host);
      if (req.url !== '/.well-known/mta-sts.txt' || policy === undefined) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end(policy);
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    serve(domain, text) {
      const host = `mta-sts.${domain}`;
      if (!contexts.has(host)) contexts.set(host, createSecureContext(ca.issue([host])));
      policies.set(host, text);
    },
    certify(host) {
      if (!contexts.has(host)) contexts.set(host, createSecureContext(ca.issue([host])));
    },
    posts,
    stall(domain) {
      const host = `mta-sts.${domain}`;
      if (!contexts.has(host)) contexts.set(host, createSecureContext(ca.issue([host])));
      stalled.add(host);
    },
    withdraw(domain) {
      policies.delete(`mta-sts.${domain}`);
    },
    fetches,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
