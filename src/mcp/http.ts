// One POST of /mcp answered by the SDK's Streamable HTTP transport, stateless: a server for the
// caller's key and a transport, both for this request only (src/http/routes/mcp.ts loads this
// module on the first request: the SDK costs ~30 MB and ~0.3 s that a server without MCP
// clients need not pay at start).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { AppContext } from '../context.ts';
import type { Principal } from '../domain/accounts/apikeys.ts';
import { createMcpServer } from './server.ts';

/** `message` is the parsed body (a JSON-RPC message or batch); the transport writes the whole answer. */
export async function serveMcp(ctx: AppContext, principal: Principal, requestId: string, req: IncomingMessage, res: ServerResponse, message: unknown): Promise<void> {
  const mcp = createMcpServer(ctx, principal, requestId);
  // sessionIdGenerator undefined: stateless, one transport per request.
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  // Answered, or the client left: either way the server goes, aborting a call still running.
  res.once('close', () => void mcp.close().catch(() => undefined));
  await mcp.connect(transport);
  await transport.handleRequest(req, res, message);
}
