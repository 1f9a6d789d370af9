// `mailroom mcp`: a stdio MCP server for desktop agents that forwards tools/list and tools/call
// to a mailroom's /mcp with an API key, so the tool set is the server's own and cannot drift.
// stdout carries protocol messages only; anything to say goes to stderr.
import type { Readable, Writable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { VERSION } from '../version.ts';

/** Longer than wait_for_message's longest wait, so the server's answer, not the bridge, ends a call. */
const CALL_TIMEOUT_MS = 120_000;

/** The /mcp endpoint of `url`: as given when it names a path, else the server's base URL + /mcp. */
export function mcpEndpoint(url: string): URL {
  const u = new URL(url);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`${url} is not an http(s) URL`);
  // The route's path (src/http/routes/mcp.ts), not imported: that would load the whole server.
  if (u.pathname === '/' || u.pathname === '') u.pathname = '/mcp';
  return u;
}

export interface Bridge {
  /** Settles when the stdio side ends (its input closed) and the remote connection is closed. */
  closed: Promise<void>;
}

/**
 * Connects to the remote /mcp first (a wrong URL or key fails here, before the stdio side
 * starts), then serves stdio until its input ends.
 */
export async function startBridge(opts: { url: URL; key: string; stdin?: Readable; stdout?: Writable }): Promise<Bridge> {
  const remote = new Client({ name: 'mailroom-mcp-bridge', version: VERSION });
  await remote.connect(new StreamableHTTPClientTransport(opts.url, { requestInit: { headers: { Authorization: `Bearer ${opts.key}` } } }));
  const local = new Server({ name: 'mailroom', version: VERSION }, { capabilities: { tools: { listChanged: false } }, instructions: remote.getInstructions() });
  local.setRequestHandler(ListToolsRequestSchema, (req, extra) => remote.listTools(req.params, { signal: extra.signal }));
  local.setRequestHandler(CallToolRequestSchema, (req, extra) => {
    // The local caller's progress token is its own: the remote call gets a token of this client,
    // whose progress is passed back under the caller's.
    const { _meta, ...params } = req.params;
    const token = _meta?.progressToken;
    const progress =
      token === undefined
        ? {}
        : {
            resetTimeoutOnProgress: true,
            onprogress: (p: { progress: number; total?: number; message?: string }) =>
              void extra.sendNotification({ method: 'notifications/progress', params: { ...p, progressToken: token } }).catch(() => undefined),
          };
    return remote.callTool(params, undefined, { signal: extra.signal, timeout: CALL_TIMEOUT_MS, ...progress });
  });
  const stdin = opts.stdin ?? process.stdin;
  const closed = new Promise<void>((resolve) => {
    const end = () => void Promise.allSettled([local.close(), remote.close()]).then(() => resolve());
    stdin.once('end', end);
    stdin.once('close', end);
  });
  await local.connect(new StdioServerTransport(stdin, opts.stdout ?? process.stdout));
  return { closed };
}
