// /mcp: the Model Context Protocol over Streamable HTTP (the official SDK's transport, every
// protocol version it supports), authenticated like every route. Stateless: each POST builds a
// server for its API key and answers on its own SSE stream (progress notifications and
// keep-alive comments while wait_for_message blocks); no session lives in this process, so any
// node can answer any request. HTTP-level
// refusals (key, Origin, media type, size, JSON) use the error envelope; the protocol's own
// (not JSON-RPC, Accept, MCP-Protocol-Version) are JSON-RPC errors, as the MCP spec has them.
import { isIP } from 'node:net';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../domain/errors.ts';
import { parseJson, readBody, type ApiRequest, type Reply, type Routes } from '../routes.ts';

export const MCP_PATH = '/mcp';

/** `localhost` or an IP literal: a name no DNS rebinding can have pointed at this server. */
function isLiteralHost(host: string): boolean {
  const name = host.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  return name.toLowerCase() === 'localhost' || isIP(name) !== 0;
}

/**
 * MCP, Streamable HTTP, security warning: servers must validate Origin (DNS rebinding). No
 * Origin (a non-browser client) passes; otherwise it must be public_url's origin, or the Host
 * the request was sent to when that is localhost or an IP literal (a rebound name is neither).
 */
function checkOrigin(ctx: AppContext, req: ApiRequest): void {
  const origin = req.headers.origin;
  if (origin === undefined) return;
  let given: string | undefined;
  try {
    given = new URL(origin).origin;
  } catch {
    // "null" (sandboxed pages, file://) or garbage: not this server's.
  }
  const own = new URL(ctx.config.http.public_url).origin;
  const host = req.headers.host;
  if (given !== undefined && given !== 'null' && (given === own || (host && isLiteralHost(host) && (given === `http://${host}` || given === `https://${host}`)))) return;
  throw new AppError('FORBIDDEN', `Origin ${JSON.stringify(origin.slice(0, 200))} is not this server's (${own}): /mcp takes requests from non-browser clients or from the server's own origin`);
}

let mcpModule: Promise<typeof import('../../mcp/http.ts')> | undefined;
/** The MCP SDK and the tools, loaded by the first request (src/mcp/http.ts). */
const loadMcp = () => (mcpModule ??= import('../../mcp/http.ts'));

/** GET (a stream for server-initiated messages) and DELETE (end a session): neither exists here. */
const notAllowed = (req: ApiRequest): Reply => ({
  status: 405,
  headers: { Allow: 'POST' },
  body: {
    error: {
      code: 'METHOD_NOT_ALLOWED',
      message: `${req.method} ${MCP_PATH}: this server is stateless (no sessions, no server-initiated stream); POST each message`,
      status: 405,
      requestId: req.requestId,
    },
  },
});

export function registerMcpRoutes(r: Routes, ctx: AppContext): void {
  r.post(
    MCP_PATH,
    async (req) => {
      checkOrigin(ctx, req);
      const message = parseJson(await readBody(req.raw, ctx.config.http.max_body_bytes), req.headers['content-type'], { arrays: true });
      if (message === undefined || (Array.isArray(message) && message.length === 0)) throw new AppError('VALIDATION_ERROR', 'request body: a JSON-RPC message (or a non-empty batch) is required');
      const { serveMcp } = await loadMcp();
      return { handOver: (res) => serveMcp(ctx, req.principal, req.requestId, req.raw, res, message) };
    },
    { protocol: true },
  );
  r.get(MCP_PATH, notAllowed, { protocol: true });
  r.delete(MCP_PATH, notAllowed, { protocol: true });
}
