// Every API route has the same shape: authenticate, rate-limit, refuse a key without the route's
// scope (or outside the key's inboxes), apply Idempotency-Key to POSTs, call one handler, and
// answer JSON or the error envelope. Handlers return a Reply; they never touch the response object.
import type { Request, Response } from '@tinyhttp/app';
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { AppContext } from '../context.ts';
import { requireInboxOf, requireNotHeldFrom, requireScope, type InboxResource, type Principal, type Scope } from '../domain/accounts/apikeys.ts';
import { AppError, isAppError } from '../domain/errors.ts';
import { beginIdempotent, finishIdempotent } from '../domain/accounts/idempotency.ts';
import { errorFields } from '../log.ts';
import { isStorageUnavailable } from '../store/store.ts';

export interface ApiRequest {
  method: string;
  path: string;
  params: Record<string, string>;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  requestId: string;
  /** Set on every route that is not public. */
  principal: Principal;
  /** The parsed JSON body (undefined when the request had none). */
  json(): Promise<unknown>;
  /** The raw request stream (multipart uploads). */
  raw: Request;
  /**
   * The body, when it had to be read before the handler (an Idempotency-Key needs its hash):
   * JSON bodies in memory, multipart uploads in a file under data_dir/tmp (removed afterwards).
   */
  readBody?: () => Readable;
}

export type Reply =
  | { status: number; body?: unknown; headers?: Record<string, string> }
  | { status: number; stream: Readable | Buffer; headers: Record<string, string> }
  /**
   * A long-lived answer (Server-Sent Events, src/http/sse.ts): the head is written, then `open`
   * writes the body itself for as long as it lasts, watching the socket's buffer.
   */
  | { status: number; headers: Record<string, string>; open: (res: ServerResponse) => void }
  /**
   * Another protocol answers over HTTP (MCP's Streamable HTTP transport, src/http/routes/mcp.ts):
   * it writes the whole response itself, head included.
   */
  | { handOver: (res: ServerResponse) => Promise<void> };

export type Handler = (req: ApiRequest) => Reply | Promise<Reply>;

export interface RouteOptions {
  /** No API key required (health, signed downloads). */
  public?: boolean;
  /** Body is multipart, read by the handler; buffered only for Idempotency-Key hashing. */
  multipart?: boolean;
  /**
   * Fields of the response shown once and stored nowhere in clear (a new API key, a webhook
   * secret). The response kept for an Idempotency-Key replay has them set to null.
   */
  secretFields?: string[];
  /**
   * The route carries another protocol (MCP) whose operations are not all writes: read-only keys
   * pass (the protocol applies the read-only rule per operation) and Idempotency-Key is not read.
   */
  protocol?: boolean;
}

/** The body kept for Idempotency-Key replays: the response without its secret fields. */
function replayableBody(body: unknown, secretFields: string[] | undefined): string {
  if (!secretFields || !body || typeof body !== 'object') return JSON.stringify(body);
  return JSON.stringify({ ...body, ...Object.fromEntries(secretFields.map((f) => [f, null])) });
}

/** What the global middleware learned about the caller, attached to the request. */
export interface CallerInfo {
  requestId: string;
  principal?: Principal;
  authError?: string;
  /** Reading the presented key failed (a database error): answered 503, not 401. */
  storageFailed?: boolean;
  started: number;
  /** The pattern of the route that answered (`/inboxes/:id`), set when one ran (metrics label). */
  route?: string;
}

/**
 * The scope each route needs (PRODUCT.md "Key permissions"): the one table of it. A GET not named
 * here needs `read`; any other route not named needs `manage` (inboxes, lists, webhooks, domains,
 * keys, deleting mail: changing what the account is). MCP checks per tool (src/mcp/server.ts).
 */
export const ROUTE_SCOPES: Readonly<Record<string, Scope>> = {
  // send: sending, drafts, uploads and the marks (read state, labels) on mail.
  'POST /inboxes/:inboxId/messages': 'send',
  'POST /inboxes/:inboxId/messages/check': 'send',
  'POST /messages/:id/reply': 'send',
  'POST /messages/:id/forward': 'send',
  'POST /messages/:id/cancel': 'send',
  'PATCH /messages/:id': 'send',
  'PATCH /threads/:id': 'send',
  'POST /inboxes/:inboxId/drafts': 'send',
  'PATCH /drafts/:id': 'send',
  'DELETE /drafts/:id': 'send',
  'POST /drafts/:id/send': 'send',
  'POST /attachments': 'send',
  // review: what a person decides, which an agent's own key should not be able to undo.
  'POST /messages/:id/release': 'review',
  'DELETE /suppressions/:address': 'review',
  'GET /audit': 'review',
};

/**
 * For a key limited to some inboxes: routes that change the whole account (refused), and routes
 * whose body must name the key's inboxes (refused without them: an account-wide list entry or
 * webhook would reach the other inboxes).
 */
const WHOLE_ACCOUNT = new Set(['POST /inboxes', 'POST /domains', 'DELETE /domains/:id', 'POST /domains/:id/verify', 'POST /dashboard/api/deliveries/:id/replay']);
/** Delivery logs and activity span every webhook: a limited key names one of its own. */
const WEBHOOK_QUERY_REQUIRED = new Set(['GET /webhooks/logs', 'GET /webhooks/activity']);
const INBOX_FIELD_REQUIRED: Readonly<Record<string, string>> = { 'POST /lists': 'inboxId', 'POST /webhooks': 'inboxIds', 'PUT /webhooks/:id': 'inboxIds' };

/** The scope of route `method path` (ROUTE_SCOPES). */
export const scopeOf = (method: string, path: string): Scope => ROUTE_SCOPES[`${method} ${path}`] ?? (method === 'GET' ? 'read' : 'manage');

/**
 * The path parameter naming something of one inbox, which a key limited to other inboxes must
 * find missing: `:inboxId`, or the `:id` of /inboxes, /messages, /threads, /drafts, /webhooks,
 * /lists, /account/api-keys (a webhook, list entry or key of the whole account is outside a
 * limited key's reach).
 */
function inboxResourceOf(path: string): { param: string; kind: InboxResource } | undefined {
  if (path.includes('/:inboxId')) return { param: 'inboxId', kind: 'inbox' };
  if (path === '/account/api-keys/:id') return { param: 'id', kind: 'key' };
  const m = /^\/(inboxes|messages|threads|drafts|webhooks|lists|attachments)\/:id(?:\/|$)/.exec(path);
  if (path === '/attachments/:id/download') return undefined; // public: the signature is the permission
  return m
    ? { param: 'id', kind: ({ inboxes: 'inbox', messages: 'message', threads: 'thread', drafts: 'draft', webhooks: 'webhook', lists: 'list', attachments: 'attachment' } as const)[m[1] as 'inboxes'] }
    : undefined;
}

export const callerOf = (req: Request): CallerInfo => (req as unknown as { mr: CallerInfo }).mr;

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** What registration works out once per route (not per request). */
interface RouteAccess {
  scope: Scope;
  write: boolean;
  resource?: { param: string; kind: InboxResource };
  wholeAccount: boolean;
  inboxField?: string;
  creates: boolean;
  webhookQuery: boolean;
  /** Whether a body's inboxId / inboxIds are checked here (new keys' are by the subset rule, 403). */
  bodyInboxes: boolean;
}

// Request ids must be unique, not secret: 8-byte slices of one random buffer refilled every 512
// ids (a randomBytes call per request was 6% of a GET's CPU in bench/ profiles).
let idPool = Buffer.alloc(0);
let idAt = 0;

export function newRequestId(): string {
  if (idAt + 8 > idPool.length) {
    idPool = randomBytes(4096);
    idAt = 0;
  }
  const id = idPool.toString('hex', idAt, idAt + 8);
  idAt += 8;
  return id;
}

export function sendError(res: Response, err: AppError, requestId: string, extraHeaders: Record<string, string> = {}): void {
  const body = JSON.stringify({ error: { code: err.code, message: err.message, status: err.status, requestId } });
  const retry = err.retryAfter !== undefined ? { 'Retry-After': String(err.retryAfter) } : {};
  res.writeHead(err.status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)), ...retry, ...extraHeaders });
  res.end(body);
}

/** Reads the whole body up to `limit` bytes; larger bodies are refused with 413. */
export function readBody(req: Request, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limit) {
    req.resume();
    return Promise.reject(new AppError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        reject(new AppError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!done) {
        done = true;
        resolve(Buffer.concat(chunks));
      }
    });
    req.on('error', (err) => {
      if (!done) {
        done = true;
        reject(err);
      }
    });
  });
}

/**
 * A JSON request body: 415 without a JSON Content-Type, 400 INVALID_JSON when it does not parse.
 * An object unless `arrays` (a JSON-RPC batch is an array); undefined when the body is empty.
 */
export function parseJson(buf: Buffer, contentType: string | undefined, opts: { arrays?: boolean } = {}): unknown {
  if (buf.length === 0) return undefined;
  if (!contentType || !/^application\/(?:[\w.+-]*\+)?json\s*(?:;|$)/i.test(contentType)) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'request bodies must be JSON with Content-Type: application/json');
  }
  let value: unknown;
  try {
    value = JSON.parse(buf.toString('utf8'));
  } catch {
    throw new AppError('INVALID_JSON', 'request body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || (Array.isArray(value) && !opts.arrays)) {
    throw new AppError('VALIDATION_ERROR', `request body must be a JSON object${opts.arrays ? ' or array' : ''}`);
  }
  return value;
}

const JSON_HEADERS = { 'Content-Type': 'application/json; charset=utf-8' };

function writeReply(res: Response, reply: Exclude<Reply, { handOver: unknown }>): void {
  if ('open' in reply) {
    res.writeHead(reply.status, reply.headers);
    reply.open(res);
    return;
  }
  if ('stream' in reply) {
    res.writeHead(reply.status, reply.headers);
    if (Buffer.isBuffer(reply.stream)) res.end(reply.stream);
    else {
      reply.stream.on('error', () => res.destroy());
      reply.stream.pipe(res);
    }
    return;
  }
  if (reply.body === undefined) {
    res.writeHead(reply.status, reply.headers ?? {});
    res.end();
    return;
  }
  // With Content-Length the head and body leave in one write; without it Node frames the body
  // as chunked (size line, body, terminator) for every JSON answer.
  const body = JSON.stringify(reply.body);
  res.writeHead(reply.status, { ...JSON_HEADERS, 'Content-Length': String(Buffer.byteLength(body)), ...reply.headers });
  res.end(body);
}

export interface RegisteredRoute {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** tinyhttp pattern, e.g. /inboxes/:id */
  path: string;
  options: RouteOptions;
}

/** A route as the table holds it: its pattern compiled, with what runs it. */
interface RouteEntry {
  path: string;
  pattern: RegExp;
  keys: string[];
  handle: (req: Request, res: Response) => void;
}

/**
 * `/inboxes/:id` as tinyhttp compiles it (regexparam): literal segments and `:name` parameters,
 * one optional trailing slash, case-insensitive.
 */
function compilePattern(path: string): { pattern: RegExp; keys: string[] } {
  const keys: string[] = [];
  let source = '';
  for (const segment of path.split('/').filter(Boolean)) {
    if (segment.startsWith(':')) {
      keys.push(segment.slice(1));
      source += '/([^/]+?)';
    } else source += '/' + segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  return { pattern: new RegExp(`^${source}/?$`, 'i'), keys };
}

/** The first segment of a path, which the table is keyed by ('' for `/`). */
const firstSegment = (path: string): string => {
  const end = path.indexOf('/', 1);
  return (end === -1 ? path.slice(1) : path.slice(1, end)).toLowerCase();
};

export class Routes {
  /** Every route registered, in order (the OpenAPI document and metrics read it). */
  readonly registered: RegisteredRoute[] = [];
  /**
   * Method, then the pattern's first segment (every pattern starts with a literal one), then the
   * routes in the order registered: a request tries the few routes under its first segment, not
   * all of them in turn as tinyhttp's router would (72 regular expressions, twice a request).
   */
  private readonly table = new Map<string, Map<string, RouteEntry[]>>();

  private readonly ctx: AppContext;

  constructor(ctx: AppContext) {
    this.ctx = ctx;
  }

  get(path: string, handler: Handler, opts?: RouteOptions) {
    this.add('GET', path, handler, opts);
  }
  post(path: string, handler: Handler, opts?: RouteOptions) {
    this.add('POST', path, handler, opts);
  }
  put(path: string, handler: Handler, opts?: RouteOptions) {
    this.add('PUT', path, handler, opts);
  }
  patch(path: string, handler: Handler, opts?: RouteOptions) {
    this.add('PATCH', path, handler, opts);
  }
  delete(path: string, handler: Handler, opts?: RouteOptions) {
    this.add('DELETE', path, handler, opts);
  }

  /**
   * The route that answers `method` on `pathname` (no query), the first registered that matches,
   * with what its parameters matched (still %-encoded). HEAD is answered by the GET route only
   * (so HEAD /inboxes never runs POST /inboxes).
   */
  match(method: string, pathname: string): { route: RouteEntry; values: string[] } | undefined {
    const routes = this.table.get(method === 'HEAD' ? 'GET' : method)?.get(firstSegment(pathname));
    for (const route of routes ?? []) {
      const found = route.pattern.exec(pathname);
      if (found) return { route, values: found.slice(1) };
    }
    return undefined;
  }

  /**
   * Runs the route of the request, its path parameters decoded (src/http/app.ts refused a path
   * with a malformed %-escape before); false when no route matches.
   */
  dispatch(req: Request, res: Response): boolean {
    const target = req.url ?? '/';
    const q = target.indexOf('?');
    const found = this.match(req.method ?? 'GET', q === -1 ? target : target.slice(0, q));
    if (!found) return false;
    const params: Record<string, string> = {};
    found.route.keys.forEach((key, i) => (params[key] = decodeURIComponent(found.values[i])));
    req.params = params;
    found.route.handle(req, res);
    return true;
  }

  private add(method: RegisteredRoute['method'], path: string, handler: Handler, opts: RouteOptions = {}) {
    if (!path.startsWith('/') || path.startsWith('/:')) throw new Error(`route ${path}: a pattern starts with a literal segment`);
    this.registered.push({ method, path, options: opts });
    const route = `${method} ${path}`;
    const access: RouteAccess = {
      scope: scopeOf(method, path),
      write: WRITE_METHODS.has(method),
      resource: inboxResourceOf(path),
      wholeAccount: WHOLE_ACCOUNT.has(route),
      inboxField: INBOX_FIELD_REQUIRED[route],
      creates: method === 'POST',
      webhookQuery: WEBHOOK_QUERY_REQUIRED.has(route),
      bodyInboxes: route !== 'POST /account/api-keys',
    };
    const entry: RouteEntry = {
      path,
      ...compilePattern(path),
      handle: (req, res) => {
        // Recorded for the request metrics, so they need not match the path again.
        callerOf(req).route = path;
        void this.run(req, res, handler, opts, access);
      },
    };
    let byFirst = this.table.get(method);
    if (!byFirst) this.table.set(method, (byFirst = new Map()));
    const first = firstSegment(path);
    byFirst.set(first, [...(byFirst.get(first) ?? []), entry]);
  }

  private async run(req: Request, res: Response, handler: Handler, opts: RouteOptions, access: RouteAccess): Promise<void> {
    const { ctx } = this;
    const caller = callerOf(req);
    const method = req.method ?? 'GET';
    // The path and query as sent; a WHATWG URL is built only where a request needs one.
    const target = req.url ?? '/';
    const q = target.indexOf('?');
    const pathname = q === -1 ? target : target.slice(0, q);
    const search = q === -1 ? '' : target.slice(q);
    let query: URLSearchParams | undefined;
    let idem: { accountId: string; key: string } | undefined;
    let spooled: string | undefined;
    try {
      if (!opts.public) {
        if (!caller.principal) throw new AppError('UNAUTHORIZED', caller.authError ?? 'missing API key: send Authorization: Bearer <key> or x-api-key');
        if (!opts.protocol) requireScope(caller.principal, access.scope, access.write);
        if (caller.principal.inboxIds) await checkInboxes(ctx, caller.principal, req, search, access);
        if (access.resource && !caller.principal.scopes.has('review'))
          await requireNotHeldFrom(ctx, caller.principal, access.resource.kind, (req.params as Record<string, string>)[access.resource.param]!);
      }
      let bodyPromise: Promise<unknown> | undefined;
      let buffered: Buffer | undefined;
      const limit = ctx.config.http.max_body_bytes;
      const limited = caller.principal?.inboxIds && access.bodyInboxes ? caller.principal : undefined;
      const apiReq: ApiRequest = {
        method,
        path: pathname,
        params: (req.params ?? {}) as Record<string, string>,
        get query() {
          return (query ??= new URLSearchParams(search));
        },
        headers: req.headers,
        requestId: caller.requestId,
        principal: caller.principal!,
        raw: req,
        json: () => {
          bodyPromise ??= (buffered ? Promise.resolve(buffered) : readBody(req, limit))
            .then((b) => parseJson(b, req.headers['content-type']))
            .then(async (body) => (limited ? checkBodyInboxes(ctx, limited, body, access) : body));
          return bodyPromise;
        },
      };

      const idemKey = req.headers['idempotency-key'];
      if (method === 'POST' && typeof idemKey === 'string' && caller.principal && !opts.protocol) {
        if (!/^[\x21-\x7e]{1,255}$/.test(idemKey)) {
          throw new AppError('VALIDATION_ERROR', '`Idempotency-Key` header must be 1 to 255 visible ASCII characters');
        }
        const url = new URL(target, 'http://localhost');
        const hasher = createHash('sha256').update(`${method} ${url.pathname}${url.search}\n`);
        if (opts.multipart) {
          // Hashed while it streams to disk: uploads never sit in memory whole.
          spooled = await spoolBody(ctx, req, ctx.config.limits.max_attachment_bytes + 1_048_576, hasher);
          const file = spooled;
          apiReq.readBody = () => createReadStream(file);
        } else {
          const body = (buffered = await readBody(req, limit));
          hasher.update(body);
          apiReq.readBody = () => Readable.from([body]);
        }
        const start = await beginIdempotent(ctx, caller.principal.accountId, idemKey, hasher.digest('hex'));
        if (start.kind === 'replay') {
          let body = start.body;
          // A replayed error names this request's id, like every other error body.
          if (start.status >= 400) {
            const stored = JSON.parse(body) as { error: Record<string, unknown> };
            body = JSON.stringify({ error: { ...stored.error, requestId: caller.requestId } });
          }
          res.writeHead(start.status, { ...JSON_HEADERS, 'Idempotent-Replayed': 'true' });
          res.end(body);
          return;
        }
        idem = { accountId: caller.principal.accountId, key: idemKey };
      }

      const reply = await handler(apiReq);
      if ('handOver' in reply) return await reply.handOver(res);
      if (idem) {
        await finishIdempotent(ctx, idem.accountId, idem.key, reply.status, 'body' in reply && reply.body !== undefined ? replayableBody(reply.body, opts.secretFields) : '');
        idem = undefined;
      }
      writeReply(res, reply);
    } catch (err) {
      const appErr = isAppError(err) ? err : undefined;
      // The client went away mid-request (closed, reset, timed out): nobody is left to answer.
      // (A request read to its end is destroyed too: only its response's socket tells.)
      if (!appErr && (res.destroyed || (req.destroyed && !req.complete)) && !res.headersSent) {
        ctx.log.info('client closed the connection', { requestId: caller.requestId, method, path: pathname, received: req.complete ? 'all' : 'part', ...errorFields(err) });
        // Not stored: the client may repeat the request with its key (a 5xx is not kept either).
        if (idem) await finishIdempotent(ctx, idem.accountId, idem.key, 500, '');
        return;
      }
      const unavailable = !appErr && isStorageUnavailable(err);
      if (!appErr) ctx.log[unavailable ? 'warn' : 'error'](unavailable ? 'storage unavailable' : 'unhandled error', { requestId: caller.requestId, method, path: pathname, ...errorFields(err) });
      const answer =
        appErr ??
        (unavailable
          ? new AppError('SERVICE_UNAVAILABLE', 'the database did not answer in time or is unavailable; retry shortly', { retryAfter: 5 })
          : new AppError('INTERNAL_ERROR', `internal error; quote request id ${caller.requestId} when reporting it`));
      if (idem) {
        try {
          await finishIdempotent(ctx, idem.accountId, idem.key, answer.status, JSON.stringify({ error: { code: answer.code, message: answer.message, status: answer.status } }));
        } catch (e) {
          ctx.log.error('idempotency record not saved', errorFields(e));
        }
      }
      if (res.headersSent) {
        res.destroy();
        return;
      }
      // A body we did not read to the end (413, or a multipart upload refused part-way) would
      // otherwise stall the next request on this keep-alive connection until it times out.
      // A body too large to take, or one a parser had begun to read (a multipart upload refused
      // part-way), is cut: the connection closes after the answer. A body nothing read yet (a
      // request refused before its handler read it: a scope, a quota) is read and dropped, as
      // Node does after a reply, so the client gets its answer rather than a reset while it
      // still sends (request_timeout bounds a slow one).
      const untouched = req.readableFlowing === null;
      if (answer.code !== 'PAYLOAD_TOO_LARGE' && !req.complete && untouched) req.resume();
      sendError(res, answer, caller.requestId, answer.code === 'PAYLOAD_TOO_LARGE' || (!req.complete && !untouched) ? { Connection: 'close' } : {});
    } finally {
      if (spooled) void rm(spooled, { force: true });
    }
  }
}

/**
 * A key limited to some inboxes: the inbox a path, `?inboxId` names must be one of its own (404 as
 * if missing otherwise), and a route that changes the whole account is refused.
 */
async function checkInboxes(ctx: AppContext, principal: Principal, req: Request, search: string, access: RouteAccess): Promise<void> {
  if (access.wholeAccount) throw new AppError('INSUFFICIENT_SCOPE', 'this API key is limited to some inboxes: it cannot change the whole account');
  if (access.resource) {
    const id = (req.params as Record<string, string> | undefined)?.[access.resource.param];
    if (id !== undefined) await requireInboxOf(ctx, principal, access.resource.kind, id);
  }
  const query = new URLSearchParams(search);
  const inboxId = query.get('inboxId');
  if (inboxId) await requireInboxOf(ctx, principal, 'inbox', inboxId);
  if (access.webhookQuery) {
    const webhookId = query.get('webhookId');
    if (!webhookId) throw new AppError('INSUFFICIENT_SCOPE', 'this API key is limited to some inboxes: name one of its webhooks in `webhookId`');
    await requireInboxOf(ctx, principal, 'webhook', webhookId);
  }
}

/** The same for a JSON body's `inboxId` / `inboxIds`; a route that needs them refuses a body without. */
async function checkBodyInboxes(ctx: AppContext, principal: Principal, body: unknown, access: RouteAccess): Promise<unknown> {
  const b = (body ?? {}) as { inboxId?: unknown; inboxIds?: unknown };
  const named = [b.inboxId, ...(Array.isArray(b.inboxIds) ? b.inboxIds : [])].filter((x): x is string => typeof x === 'string');
  // A POST without them reaches the whole account; a PUT changes only what its body names.
  const given = access.inboxField === 'inboxId' ? b.inboxId : b.inboxIds;
  if (access.inboxField && !named.length && (access.creates || given !== undefined)) {
    throw new AppError('INSUFFICIENT_SCOPE', `this API key is limited to some inboxes: name them in \`${access.inboxField}\``);
  }
  for (const id of named) await requireInboxOf(ctx, principal, 'inbox', id);
  // A send may not carry another inbox's attachment out (an upload no message sent yet is the account's).
  const attachmentIds = (body as { attachmentIds?: unknown } | null)?.attachmentIds;
  if (Array.isArray(attachmentIds)) for (const id of attachmentIds.slice(0, 100)) if (typeof id === 'string') await requireInboxOf(ctx, principal, 'attachment', id);
  return body;
}

/**
 * Streams a request body to a file under data_dir/tmp, feeding `hasher` on the way; its path.
 * Past `limit` bytes: 413 and no file.
 */
async function spoolBody(ctx: AppContext, req: Request, limit: number, hasher: Hash): Promise<string> {
  if (Number(req.headers['content-length'] ?? NaN) > limit) {
    req.resume();
    throw new AppError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`);
  }
  const dir = join(ctx.config.data_dir, 'tmp');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `upload-${randomBytes(8).toString('hex')}`);
  let size = 0;
  const count = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      if (size > limit) return done(new AppError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`));
      hasher.update(chunk);
      done(null, chunk);
    },
  });
  try {
    await pipeline(req, count, createWriteStream(file, { mode: 0o600 }));
    return file;
  } catch (err) {
    await rm(file, { force: true });
    throw err;
  }
}
