// mailroom mcp --url URL --key KEY — the MCP tools of a running mailroom over stdio, for desktop
// agents (Claude Desktop, Cursor, …) that start an MCP server as a child process. The bridge is
// loaded on use: other commands do not pay for the MCP SDK.
import type { Command } from 'commander';
import { CliError } from '../shared.ts';

export function registerMcp(program: Command): void {
  program
    .command('mcp')
    .description('serve the MCP tools of a running mailroom on stdin/stdout (a bridge to its /mcp endpoint); logs go to stderr')
    .option('--url <url>', 'the server: its base URL (/mcp is added) or the full /mcp URL (default: env MAILROOM_URL)')
    .option('--key <key>', 'API key sent as a Bearer token (default: env MAILROOM_API_KEY, which keeps it out of process listings)')
    .action(async (opts: { url?: string; key?: string }) => {
      const url = opts.url ?? process.env.MAILROOM_URL;
      const key = opts.key ?? process.env.MAILROOM_API_KEY;
      if (!url) throw new CliError('--url is required (or set MAILROOM_URL), e.g. --url http://localhost:3000');
      if (!key) throw new CliError('--key is required (or set MAILROOM_API_KEY): an API key from `mailroom keys create`');
      const { mcpEndpoint, startBridge } = await import('../../src/mcp/bridge.ts');
      let endpoint: URL;
      try {
        endpoint = mcpEndpoint(url);
      } catch {
        throw new CliError(`--url ${JSON.stringify(url)} is not an http(s) URL`);
      }
      let bridge;
      try {
        bridge = await startBridge({ url: endpoint, key });
      } catch (err) {
        throw new CliError(`cannot use ${endpoint.href}: ${(err as Error).message}`);
      }
      process.stderr.write(`mailroom: MCP bridge to ${endpoint.href} ready on stdio\n`);
      await bridge.closed;
    });
}
