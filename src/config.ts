// Configuration: one schema holds every key with its default and a one-line description.
// Loading rejects unknown keys, wrong types and unparsable durations or listen addresses,
// naming the key, so a typo never silently falls back to a default.
import { readFileSync, existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { parse as parseToml } from 'smol-toml';

export class ConfigError extends Error {
  /** One line per bad key (the message is these lines joined). */
  readonly problems: string[];
  constructor(problems: string | string[]) {
    const list = Array.isArray(problems) ? problems : [problems];
    super(list.join('\n'));
    this.problems = list;
  }
}

interface Field<T> {
  default: T;
  /** The default as it is written in TOML (durations stay "15m", not 900000). */
  example: string;
  description: string;
  parse(value: unknown, key: string): T;
}

const fail = (key: string, what: string): never => {
  throw new ConfigError(`config key \`${key}\`: ${what}`);
};

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "15m" → 900000. Accepts ms, s, m, h, d; a bare number is not accepted (ambiguous). */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim());
  if (!m) return undefined;
  return Math.round(Number(m[1]) * DURATION_UNITS[m[2]]);
}

export interface ListenAddress {
  host: string;
  port: number;
}

/** "127.0.0.1:3000", "0.0.0.0:25", "[::1]:25"; port 0 picks a free port (tests). */
export function parseListen(text: string): ListenAddress | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(text.trim());
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  return { host: m[1] ?? m[2], port };
}

const str = (def: string, description: string): Field<string> => ({
  default: def,
  example: JSON.stringify(def),
  description,
  parse: (v, k) => (typeof v === 'string' ? v : fail(k, `expected a string, got ${typeof v}`)),
});

const int = (def: number, description: string, min = 0): Field<number> => ({
  default: def,
  example: String(def),
  description,
  parse: (v, k) => (typeof v === 'number' && Number.isInteger(v) && v >= min ? v : fail(k, `expected an integer ≥ ${min}, got ${JSON.stringify(v)}`)),
});

const bool = (def: boolean, description: string): Field<boolean> => ({
  default: def,
  example: String(def),
  description,
  parse: (v, k) => (typeof v === 'boolean' ? v : fail(k, `expected true or false, got ${JSON.stringify(v)}`)),
});

const oneOf = <T extends string>(values: readonly T[], def: T, description: string): Field<T> => ({
  default: def,
  example: JSON.stringify(def),
  description,
  parse: (v, k) => (values.includes(v as T) ? (v as T) : fail(k, `expected one of ${values.map((x) => JSON.stringify(x)).join(', ')}, got ${JSON.stringify(v)}`)),
});

const duration = (def: string, description: string, min?: string): Field<number> => ({
  default: parseDuration(def)!,
  example: JSON.stringify(def),
  description,
  parse: (v, k) => {
    const ms = typeof v === 'string' ? parseDuration(v) : undefined;
    if (ms === undefined) return fail(k, `expected a duration such as "30s", "5m", "2h", got ${JSON.stringify(v)}`);
    return min !== undefined && ms < parseDuration(min)! ? fail(k, `must be at least ${min}, got ${JSON.stringify(v)}`) : ms;
  },
});

const durations = (def: string[], description: string): Field<number[]> => ({
  default: def.map((d) => parseDuration(d)!),
  example: JSON.stringify(def).replaceAll(',', ', '),
  description,
  parse: (v, k) => {
    if (!Array.isArray(v) || v.length === 0) return fail(k, 'expected a non-empty array of durations such as ["5s", "30s"]');
    return v.map((item, i) => {
      const ms = typeof item === 'string' ? parseDuration(item) : undefined;
      return ms ?? fail(`${k}[${i}]`, `expected a duration such as "30s", got ${JSON.stringify(item)}`);
    });
  },
});

const strings = (def: string[], description: string): Field<string[]> => ({
  default: def,
  example: JSON.stringify(def),
  description,
  parse: (v, k) => (Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : fail(k, 'expected an array of strings')),
});

/** "192.0.2.53", "192.0.2.53:5353", "2001:db8::53" or "[2001:db8::53]:5353": what setServers() takes. */
export function isResolverAddress(text: string): boolean {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text) ?? /^([^:]+):(\d{1,5})$/.exec(text);
  if (m) return isIP(m[1]) !== 0 && Number(m[2]) <= 65535;
  return isIP(text) !== 0;
}

/** Resolver addresses, checked at load (the resolver itself is made on first use). */
const resolvers = (def: string[], description: string): Field<string[]> => ({
  ...strings(def, description),
  parse: (v, k) => {
    const list = strings(def, description).parse(v, k);
    const bad = list.find((x) => !isResolverAddress(x));
    return bad === undefined ? list : fail(k, `${JSON.stringify(bad)} is not an IP address or "ip:port"`);
  },
});

/**
 * A DNS host name (RFC 1123 §2.1): dot-separated labels of letters, digits and hyphens, none
 * starting or ending with a hyphen, at most 63 characters each and 253 in all; one final dot
 * is allowed. An IP address is not a host name (an MX target must be a name, RFC 5321 §5.1).
 */
export function isHostname(text: string): boolean {
  const name = text.endsWith('.') ? text.slice(0, -1) : text;
  // Only digits and dots can make an address the labels below accept (":" fails them): asking
  // isIP about any name compiled Node's IPv6 pattern, 3-5 ms of every start (bench/ (g)).
  if (name.length === 0 || name.length > 253 || (/^[\d.]+$/.test(name) && isIP(name) !== 0)) return false;
  return name.split('.').every((label) => /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(label));
}

const hostname = (def: string, description: string): Field<string> => ({
  ...str(def, description),
  parse: (v, k) => {
    const name = str(def, description).parse(v, k);
    return isHostname(name) ? name : fail(k, `${JSON.stringify(name)} is not a valid DNS host name (letters, digits, hyphens and dots, such as "mail.example.com")`);
  },
});

/** An absolute http:// or https:// URL, kept without a trailing slash (paths are appended to it). */
const baseUrl = (def: string, description: string): Field<string> => ({
  ...str(def, description),
  parse: (v, k) => {
    const text = str(def, description).parse(v, k);
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname || !/^https?:\/\//i.test(text)) {
      return fail(k, `expected an absolute http:// or https:// URL such as "https://mail.example.com", got ${JSON.stringify(text)}`);
    }
    if (url.search || url.hash || url.username || url.password) return fail(k, `must not contain a query, a fragment or credentials, got ${JSON.stringify(text)}`);
    return text.replace(/\/+$/, '');
  },
});

/** A URL from the config (relay, database) without its password, for logs and terminals. */
export function redactUrl(text: string): string {
  try {
    const url = new URL(text);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** "" (embedded SQLite) or a postgres:// / postgresql:// connection URL. */
const databaseUrl = (description: string): Field<string> => ({
  ...str('', description),
  parse: (v, k) => {
    const text = str('', description).parse(v, k);
    if (text === '') return text;
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') || !url.hostname) {
      return fail(k, `expected "" or a PostgreSQL URL such as "postgres://mailroom:secret@db.internal:5432/mailroom", got ${url ? `a ${url.protocol}// URL` : 'text that is not a URL'}`);
    }
    return text;
  },
});

const listen = (def: string, description: string, optional = false): Field<ListenAddress | null> => ({
  default: def ? parseListen(def)! : null,
  example: JSON.stringify(def),
  description,
  parse: (v, k) => {
    if (optional && v === '') return null;
    const addr = typeof v === 'string' ? parseListen(v) : undefined;
    return addr ?? fail(k, `expected "host:port" such as "127.0.0.1:3000", got ${JSON.stringify(v)}`);
  },
});

export const CONFIG_SCHEMA = {
  data_dir: str('./data', 'Directory for the SQLite database, attachments and raw messages.'),
  hostname: hostname('localhost', 'Public name of this host: EHLO name, MX target in DNS records, Message-ID host.'),
  shared_domain: hostname('mailroom.localhost', 'Domain of inboxes that do not use a custom domain.'),
  database: {
    url: databaseUrl(
      'Where the state lives: "" for the embedded SQLite file under data_dir; a "postgres://user:pass@host:5432/db" URL names the PostgreSQL database that several nodes share (docs/several-nodes.md). The environment variable MAILROOM_DATABASE_URL overrides it.',
    ),
    connections: int(
      10,
      'PostgreSQL: connections this node opens for mail (SMTP, the job runner) and for the API when `api_connections` is 0. More than about twice the cores rarely helps: the database and the node share them.',
      1,
    ),
    api_connections: int(
      6,
      'PostgreSQL: connections of a pool of their own for API clients (HTTP, MCP, IMAP), so a flood of API reads cannot leave mail waiting for a connection, nor mail the API; 0 shares `connections`. Searches take at most `limits.concurrent_searches` of them.',
    ),
    connect_timeout: duration(
      '10s',
      'PostgreSQL: opening a connection (TCP, TLS, login) may take this long; then the statement that needed it fails (a start-up exits with the error) instead of waiting for ever on an unreachable server.',
      '100ms',
    ),
    statement_timeout: duration(
      '60s',
      'PostgreSQL: the server cancels a statement running longer than this (statement_timeout, SQLSTATE 57014), so a stuck query cannot hold a pooled connection; the request or job that ran it fails. `mailroom migrate` runs without it.',
      '100ms',
    ),
    idle_in_transaction_timeout: duration(
      '60s',
      'PostgreSQL: the server ends a session that stays idle inside a transaction this long (idle_in_transaction_session_timeout), so a transaction left open cannot hold its locks for ever.',
      '100ms',
    ),
    keepalive: duration(
      '30s',
      'PostgreSQL: TCP keepalive probes start after a connection is idle this long, so a server or network gone silently (a failover, a dropped NAT entry) is noticed and its connections replaced; "0s" leaves the system default.',
    ),
  },
  http: {
    listen: listen('127.0.0.1:3000', 'Address the HTTP API listens on.'),
    public_url: baseUrl('http://localhost:3000', 'Base URL clients reach the API at; attachment download URLs start with it.'),
    max_body_bytes: int(1_048_576, 'Largest JSON request body accepted; larger bodies get 413.', 1),
    shutdown_grace: duration('10s', 'How long shutdown waits for in-flight HTTP requests and SMTP messages being received; an SMTP session between messages is told 421 at once.'),
    headers_timeout: duration('10s', 'A client must send its request headers within this time; else 408 and the connection is closed.'),
    request_timeout: duration(
      '30s',
      'A client must send its whole request (headers and body, uploads included) within this time; else 408 and the connection is closed (slow-body clients cannot hold connections). Raise it for large uploads over slow links.',
    ),
    max_connections: int(1000, 'Most simultaneous HTTP connections; further ones are closed at once.', 1),
    max_connections_per_ip: int(
      100,
      'Most simultaneous HTTP connections from one client address (IPv6: its /64); further ones from it are closed at once, so one client cannot take every connection while other addresses are still served.',
      1,
    ),
  },
  smtp: {
    listen: listen('127.0.0.1:2525', 'Address the inbound (MX) SMTP listener binds; operators set "0.0.0.0:25".'),
    tls_cert: str('', 'PEM certificate file for STARTTLS; STARTTLS is offered when cert and key are set. Reloaded when it changes.'),
    tls_key: str('', 'PEM private key file for STARTTLS.'),
    max_message_bytes: int(26_214_400, 'Largest message accepted (advertised with SIZE); larger ones get 552.', 1),
    max_recipients: int(100, 'Most RCPT TO per message; further recipients get 452.', 1),
    max_connections: int(200, 'Most simultaneous SMTP connections; further ones get 421.', 1),
    max_connections_per_ip: int(20, 'Most simultaneous SMTP connections from one client address (IPv6: its /64); further ones get 421, so one sender cannot take every slot.', 1),
    idle_timeout: duration('5m', 'An SMTP client silent for this long is disconnected.'),
    max_session_time: duration('30m', 'An SMTP session is closed with 421 after this long, however busy (a sender keeping a connection open forever with NOOPs).'),
    max_junk_commands: int(100, 'NOOP, RSET, VRFY and HELP commands allowed between two MAIL commands (Postfix: smtpd_junk_command_limit); the next one gets 421.', 1),
    inline_processing: int(
      8,
      'Messages processed (parsed, checked, stored for the API) before their 250 at once; messages arriving while that many are in progress, or while mail waits in the spool, are spooled: committed raw, answered 250 and processed moments later. 0 spools every message.',
      0,
    ),
    memory_budget: int(
      268_435_456,
      'Memory SMTP transactions may hold at once (default 256 MiB), on the MX port and SMTP submission together, counted as twelve times the bytes each message in progress holds (measured: parsing holds copies); a message (inbound or submitted) holds at most its first 256 KiB, the rest goes to disk as it arrives. A transaction that would go over it while others are in progress gets 452 4.3.1 and the sender retries later.',
      1_048_576,
    ),
    analysis_workers: int(
      -1,
      'Worker threads that parse received messages and check their SPF, DKIM and DMARC, so that this CPU work runs beside the SMTP sessions, the API and the commits instead of among them. -1: one per CPU core beyond the first (at most 4); 0: on the main thread.',
      -1,
    ),
    spool_limit: int(20_000, 'Most spooled messages waiting to be processed; beyond it new mail gets 451 4.3.1 and the sender retries later.', 1),
    analysis_timeout: duration(
      '60s',
      'Time the analysis of one received message (parsing, SPF, DKIM, DMARC on a worker thread) may take, waiting for a thread included; past it the message is stored unanalysed: its raw source and subject kept, no parsed body, authentication `permerror`, and its thread (which may be stuck in it) takes no new message and is stopped once the others it holds end. A message on two threads that died is stored the same way. Never analysed again on the main thread.',
      '1s',
    ),
  },
  submission: {
    listen: listen(
      '',
      'Address of the SMTP submission listener (mail clients and agents send through it: STARTTLS with smtp.tls_cert and smtp.tls_key, AUTH with an inbox address and an API key of its account); operators set "0.0.0.0:587"; "" turns it off.',
      true,
    ),
  },
  imap: {
    listen: listen(
      '',
      'Address of the IMAP listener (mail clients read an inbox\'s mail: STARTTLS with smtp.tls_cert and smtp.tls_key, LOGIN with an inbox address and an API key of its account with `read`); operators set "0.0.0.0:143"; "" turns it off.',
      true,
    ),
    tls_listen: listen('', 'Address of the IMAP listener with implicit TLS (RFC 8314, smtp.tls_cert and smtp.tls_key); operators set "0.0.0.0:993"; "" turns it off.', true),
    max_connections: int(500, 'Most simultaneous IMAP connections, both listeners together; further ones get `* BYE` at once.', 1),
    max_connections_per_ip: int(20, 'Most simultaneous IMAP connections from one client address (IPv6: its /64); further ones get `* BYE` at once.', 1),
    connections_per_account: int(20, 'Most logged-in IMAP sessions of one account on a node (a phone and a desktop hold two or three per inbox); the next LOGIN gets `NO [LIMIT]`.', 1),
    max_literal_bytes: int(
      26_214_400,
      'Largest literal a client may send (APPEND of a message, a long search string); a larger one gets `NO [TOOBIG]` before it is sent (a non-synchronizing one closes the connection).',
      1024,
    ),
    max_line_bytes: int(65_536, 'Longest command line, literals apart; a longer one gets `* BYE` and the connection is closed.', 1024),
    idle_timeout: duration('30m', 'An IMAP client silent this long (IDLE included: clients re-issue it every 29 minutes, RFC 9051 §6.3.13) is logged out with `* BYE`.', '1s'),
  },
  outbound: {
    mode: oneOf(['email', 'dry-run'] as const, 'email', '"email" delivers for real; "dry-run" sends nothing off the box (delivery = "dry-run").'),
    mx_port: int(25, 'Port used for direct-to-MX delivery (tests point it elsewhere).', 1),
    relay: str('', 'Optional smarthost that receives all outbound mail, e.g. smtp://user:pass@host:587.'),
    relay_verify_tls: bool(true, "Check the relay's TLS certificate (false only for a relay with a self-signed certificate)."),
    retry_schedule: durations(['1m', '5m', '30m', '2h', '6h', '12h'], 'Delays between delivery attempts after a temporary failure; then the message fails.'),
    concurrency_per_domain: int(16, 'Most deliveries in flight to one recipient domain (SMTP connections per MX host); Postfix allows 20.', 1),
    timeout: duration('60s', 'Connection and reply timeout for one SMTP delivery attempt.'),
    mta_sts: bool(
      true,
      'Honour the MTA-STS policies (RFC 8461) of recipient domains: under `enforce`, mail goes only to the MX hosts the policy names, over TLS with a certificate valid for the MX name, else the attempt is deferred; `testing` policies are only reported (TLS-RPT). false turns it off.',
    ),
    mta_sts_port: int(443, 'Port of the HTTPS server MTA-STS policies are fetched from (tests point it elsewhere).', 1),
    mta_sts_timeout: duration(
      '10s',
      'Time one MTA-STS policy fetch may take (DNS of the mta-sts host, TLS, the whole body); past it the fetch fails, the domain is treated as having no policy (unless a cached one is still valid) and TLS-RPT reports sts-policy-fetch-error.',
      '100ms',
    ),
    mta_sts_max_bytes: int(
      65_536,
      'Largest MTA-STS policy file read; a larger one is abandoned there, the domain is treated as having no policy (unless a cached one is still valid) and TLS-RPT reports sts-policy-invalid.',
      256,
    ),
    tls_reports: bool(
      true,
      'Send TLS-RPT aggregate reports (RFC 8460): once a day, to each recipient domain that publishes a `_smtp._tls` record, the sessions of the previous UTC day that succeeded and failed its MTA-STS or DANE policy (mail through our own sender, or an https POST checked like a webhook target). Only domains publishing that record have their sessions counted. false counts and sends nothing.',
    ),
    dane: bool(
      true,
      'Authenticate MX hosts with DANE (RFC 7672) when `dns.dnssec` is true: an MX host with usable DNSSEC-signed TLSA records gets TLS required and its certificate checked against them (DANE-EE, DANE-TA), before and instead of MTA-STS; a mismatch defers the attempt. false turns it off.',
    ),
    tls_ca_file: str(
      '',
      'PEM file of certificate authorities trusted beside the system roots when checking MTA-STS policy servers and MX certificates (a private PKI; tests); "" uses the system roots only.',
    ),
  },
  dns: {
    servers: resolvers([], 'Resolvers ("ip" or "ip:port") for MX lookups, domain checks and SPF/DKIM/DMARC; [] uses the system resolvers.'),
    timeout: duration('5s', 'Time limit of one DNS query.'),
    dnssec: bool(
      false,
      'The resolvers in `dns.servers` validate DNSSEC (unbound, a local validating resolver) and their authenticated-data flag is trusted: it enables DANE for outbound mail (`outbound.dane`). Leave false with a resolver that does not validate, or one reached over an untrusted network.',
    ),
  },
  limits: {
    daily_send_limit: int(100, 'Default dailySendLimit of new inboxes.', 0),
    requests_per_minute: int(600, 'API requests allowed per account per minute, whatever the number of its keys (unauthenticated requests: per client address).', 1),
    idempotency_window: duration('24h', 'How long an Idempotency-Key is remembered.'),
    max_attachment_bytes: int(26_214_400, 'Largest attachment upload; larger uploads get 413.', 1),
    list_body_bytes: int(
      65_536,
      'Longest body (each of bodyText, bodyHtml, extractedText, extractedHtml) in list answers (messages, threads, events, MCP lists and searches) and event stream frames; a longer one is cut there and the Message says `bodyTruncated: true`. GET /messages/{id} has it whole.',
      1024,
    ),
    search_matches: int(
      250,
      'Matches of a search (`q`) ranked by relevance and counted: the newest this many; older ones follow them newest first, and past it `total` is this number with `totalIsLowerBound: true`.',
      1,
    ),
    inboxes_per_account: int(1000, 'Most inboxes one account may have; POST /inboxes past it gets 403 INBOX_LIMIT_REACHED.', 1),
    storage_bytes_per_account: int(
      10_737_418_240,
      'Bytes one account may store (default 10 GiB): the sources of its messages, received and sent, and its attachments, uploads included. Once it is reached, inbound mail to its inboxes gets 452 4.2.2 (mailbox full: the sender retries later) at RCPT, and sends and uploads get 403 QUOTA_EXCEEDED, until messages are deleted.',
      1_048_576,
    ),
    uploads_per_account: int(1000, 'Most uploaded attachments (POST /attachments) of one account that no sent message carries yet; the next upload gets 403 QUOTA_EXCEEDED.', 1),
    drafts_per_account: int(1000, 'Most drafts one account may keep; the next POST /inboxes/{id}/drafts gets 403 QUOTA_EXCEEDED.', 1),
    search_terms: int(32, 'Most terms in a search (`q`), a repeated term counted once and each word of a phrase counted; a word prefix needs 2 characters. Past either: 400 INVALID_QUERY.', 1),
    search_timeout: duration(
      '5s',
      'Time budget of one search (`q` on message and thread lists and MCP searches), waiting for a free search slot included; past it the search stops and answers 503 SEARCH_TIMEOUT with Retry-After.',
      '1ms',
    ),
    searches_per_account: int(
      2,
      'Searches (`q`) one account runs at once (one abandoned past `search_timeout` counts until its statement has ended); the next answers 429 RATE_LIMITED with Retry-After until one ends. Keep it below `concurrent_searches`, so that other accounts find slots free.',
      1,
    ),
    concurrent_searches: int(
      4,
      'Searches the process runs at once, all accounts together: on SQLite the worker threads that run them off the event loop, on PostgreSQL the connections of `database.api_connections` they may hold. More wait for a slot, within their `search_timeout`.',
      1,
    ),
    labels_per_message: int(50, 'Most labels one message carries; a PATCH of a message or thread that would give one more gets 400 VALIDATION_ERROR naming `addLabels` and changes nothing.', 1),
    streams_per_account: int(
      20,
      'Event streams (GET /events/stream), long-polls (`wait`) and MCP wait_for_message calls one account may hold open at once on a node; the next gets 429 TOO_MANY_STREAMS (MCP: a tool error with that code) until one ends.',
      1,
    ),
    stream_buffer_bytes: int(
      1_048_576,
      'Unsent bytes an event stream may hold for its client. A frame that would take it past this waits for the client to read; one that is still waiting after `stream_stall_timeout` ends the stream with `event: dropped` (resume with Last-Event-ID).',
      65_536,
    ),
    stream_stall_timeout: duration('30s', 'An event stream whose client has not read what was sent for this long is cut (`event: dropped`, then the socket is closed); resume with Last-Event-ID.'),
    account_daily_send_limit: int(
      1000,
      'Sends per account per UTC day, all its inboxes together (each send counts once, whatever its recipients); the next send gets 429 DAILY_SEND_LIMIT_EXCEEDED (SMTP submission 451 4.7.1). `mailroom accounts set-limits --daily` overrides it for one account.',
      0,
    ),
  },
  webhooks: {
    retry_schedule: durations(['5s', '30s', '5m', '30m', '2h'], 'Delays between webhook delivery attempts; after the last the delivery is failed.'),
    timeout: duration('10s', 'A delivery succeeds only on a 2xx answer within this time.'),
    concurrency_per_webhook: int(16, 'Most deliveries in flight to one webhook; its further events wait their turn, in order of their due time. Within jobs.concurrency, which all jobs share.', 1),
    allow_insecure_targets: bool(false, 'Allow http:// and loopback/private webhook targets (development and tests only).'),
  },
  attachments: {
    url_ttl: duration('15m', 'Lifetime of presigned attachment download URLs.'),
    text_max_bytes: int(26_214_400, 'Largest attachment GET /attachments/{id}/text extracts text from; larger ones get 422 ATTACHMENT_TEXT_FAILED.', 1),
    text_max_chars: int(1_000_000, 'Longest text GET /attachments/{id}/text returns; longer text is cut there and marked `truncated`.', 1),
    text_timeout: duration('15s', 'Time one text extraction (PDF, DOCX, HTML) may take in its worker process; then the process is killed and the answer is 422 ATTACHMENT_TEXT_FAILED.', '100ms'),
    text_max_memory: int(
      268_435_456,
      'Memory (bytes of data address space, RLIMIT_DATA) of one text extraction process, whatever the libraries allocate (a zip bomb inflated, a Flate stream decoded); past it the process dies and the answer is 422 ATTACHMENT_TEXT_FAILED (the file expands too much).',
      134_217_728,
    ),
    text_workers: int(2, 'Text extractions (PDF, DOCX, HTML) running at once, each in its own process; more wait in a queue served round robin across accounts.', 1),
    text_queue_per_account: int(4, 'Text extractions of one account waiting for a free worker; the next gets 503 TEXT_EXTRACTION_BUSY with Retry-After.', 1),
    text_queue_wait: duration('30s', "Time a text extraction may wait for a free worker; then the answer is 503 TEXT_EXTRACTION_BUSY with Retry-After (not remembered as the file's result).", '100ms'),
  },
  jobs: {
    concurrency: int(32, 'Most jobs (sends, webhook deliveries) running at once; above outbound.concurrency_per_domain, so one busy domain leaves room for the rest.', 1),
    lease: duration(
      '30s',
      'A running job holds its lease while its process lives (renewed every third of it); a job whose process is gone (killed, its machine lost) is run again, by any node, this long after its last renewal.',
    ),
    retention: duration('7d', 'Finished jobs are kept this long for inspection, then swept.'),
    attempt_timeout: duration(
      '10m',
      "One job attempt (a delivery to one domain's MX hosts, a webhook POST) may run this long, however busy its connection; then it is aborted (its SMTP connection closed) and counted as a temporary failure, retried on its schedule. A tarpitting MX cannot hold a slot for ever. Keep it above outbound.timeout.",
      '1s',
    ),
  },
  retention: {
    events: duration('30d', 'Events (GET /events, webhook payloads) are kept this long, then deleted; at least 7d, the time GET /events promises. Events about a message go with the message.', '7d'),
    delivery_logs: duration('30d', 'Webhook delivery logs (webhooks deliveries, the dashboard) are kept this long, then deleted.', '1d'),
    audit: duration('365d', 'Audit log entries (GET /audit, mailroom audit) are kept this long, then deleted in the hourly sweep.', '1d'),
    reports: duration(
      '400d',
      'DMARC aggregate and TLS-RPT reports received for custom domains (GET /domains/{id}/dmarc, /tls-reports) are kept this long after they arrived, then deleted in the hourly sweep.',
      '1d',
    ),
  },
  metrics: {
    listen: listen('', 'Address of the Prometheus endpoint GET /metrics (no key; keep it private, e.g. "127.0.0.1:9464"); "" turns it off.', true),
  },
  domains: {
    recheck_interval: duration('1h', 'Unverified domains are re-checked in DNS this often in the background.'),
  },
  inbound: {
    mta_sts_mode: oneOf(
      ['testing', 'enforce'] as const,
      'testing',
      'Mode of the MTA-STS policy served at https://mta-sts.<domain>/.well-known/mta-sts.txt for verified custom domains: "testing" asks senders to report TLS failures without refusing, "enforce" to deliver only over valid TLS to the MX it names.',
    ),
    report_max_bytes: int(10_485_760, 'Largest DMARC or TLS-RPT report taken, after decompression (gzip, zip); past it the report mail is refused with 550 5.7.1 and nothing is stored.', 1024),
    report_max_records: int(
      10_000,
      'Most rows one DMARC aggregate report (record elements) or TLS-RPT report (policies and failure details) may hold; past it the report is refused with 550 5.7.1 and nothing is stored.',
      1,
    ),
  },
  screening: {
    mode: oneOf(
      ['off', 'monitor', 'hold'] as const,
      'monitor',
      'Screening of inbound mail for inboxes that set none (PATCH /inboxes/{id} `screening`): "off" (not screened), "monitor" (every inbound Message carries `screening`), "hold" (a `review` message is `held` until a key with the `review` scope releases it). See docs/agents.md.',
    ),
    classifier_url: str(
      '',
      'Optional HTTP endpoint (a local LLM or guard model) also asked about each screened message: POST JSON {from, subject, text, screening}, answer {verdict: "clear"|"review", reason?}. Its verdict can only raise a `clear`; "" asks none.',
    ),
    classifier_timeout: duration(
      '5s',
      'The classifier must answer within this time; past it (or on any failure) the message keeps the built-in verdict with a `classifier` reason saying so, and is stored as usual.',
      '100ms',
    ),
    classifier_max_bytes: int(32_768, "Most bytes of a message's visible text sent to the classifier; the rest is cut.", 1024),
  },
  policy: {
    thread_hourly_sends: int(
      5,
      'Sends one inbox may make in one thread within an hour (held, canceled and scheduled ones not counted); the next is held for a person with reason `thread_budget` (POST /messages/{id}/release or /cancel), so two agents answering each other stop there.',
      1,
    ),
    hold_expiry: duration(
      '72h',
      'A send held for a person (reasons first_contact, always, secret_detected, auto_reply_loop, thread_budget) that nobody releases within this time is canceled (status `canceled`, event message.canceled, audit entry by the system).',
      '1m',
    ),
  },
} as const;

/**
 * The budgets: every config key that bounds what one request, stream, session, message, job or
 * account may cost, with what it bounds and what happens past it. docs/security.md's budgets
 * table is generated from this and the schema's defaults (`npm run docs:config`, checked by
 * test/unit/config-docs.test.ts), so a budget cannot be added without its row.
 */
export const BUDGETS: Record<string, { what: string; past: string }> = {
  'http.max_connections': { what: 'HTTP connections in all', past: 'closed at once' },
  'http.max_connections_per_ip': { what: 'HTTP connections from one address (IPv6: one /64)', past: 'the new connection is closed at once, unanswered; other addresses are served' },
  'http.headers_timeout': { what: 'HTTP request headers', past: '`408`, closed' },
  'http.request_timeout': { what: 'Whole HTTP request, body included', past: '`408`, closed (raise it for large uploads over slow links)' },
  'http.max_body_bytes': { what: 'JSON request body', past: '`413 PAYLOAD_TOO_LARGE`' },
  'limits.max_attachment_bytes': { what: 'Attachment upload', past: '`413 PAYLOAD_TOO_LARGE`' },
  'limits.requests_per_minute': { what: 'API requests per account (all its keys together)', past: '`429 RATE_LIMITED` with `Retry-After`' },
  'limits.list_body_bytes': { what: 'A body in a list answer or an event frame', past: 'cut there, `bodyTruncated: true`; `GET /messages/{id}` has it whole' },
  'limits.labels_per_message': { what: 'Labels on one message', past: '`400 VALIDATION_ERROR` naming `addLabels`, nothing changed' },
  'limits.search_terms': { what: 'Terms in a search `q` (repeats dropped; each word of a phrase counts); word prefixes need 2 characters', past: '`400 INVALID_QUERY`' },
  'limits.search_matches': { what: 'Matches of a search ranked and counted', past: 'older matches follow newest first; `totalIsLowerBound: true`' },
  'limits.search_timeout': { what: 'Time of one search, waiting for a slot included', past: '`503 SEARCH_TIMEOUT` with `Retry-After`' },
  'limits.searches_per_account': { what: 'Searches of one account at once', past: '`429 RATE_LIMITED` with `Retry-After: 1`' },
  'limits.concurrent_searches': { what: 'Searches of the whole process at once (SQLite: worker threads; PostgreSQL: pool connections)', past: 'waits for a slot within its `search_timeout`' },
  'limits.inboxes_per_account': { what: 'Inboxes per account', past: '`403 INBOX_LIMIT_REACHED`' },
  'limits.storage_bytes_per_account': { what: 'Bytes stored per account (message sources and attachments)', past: 'inbound `452 4.2.2` at RCPT; sends and uploads `403 QUOTA_EXCEEDED`' },
  'limits.uploads_per_account': { what: 'Uploads per account that no sent message carries', past: '`403 QUOTA_EXCEEDED`' },
  'limits.drafts_per_account': { what: 'Drafts per account', past: '`403 QUOTA_EXCEEDED`' },
  'limits.streams_per_account': { what: 'Event streams, long-polls (`wait`) and MCP `wait_for_message` calls of one account open at once (per node)', past: '`429 TOO_MANY_STREAMS`' },
  'limits.stream_buffer_bytes': { what: 'Unsent bytes one event stream holds for its client', past: 'the frame waits; a client that does not read is cut by `stream_stall_timeout`' },
  'limits.stream_stall_timeout': { what: 'An event stream whose client reads nothing', past: '`event: dropped`, the stream ends (resume with `Last-Event-ID`)' },
  'limits.daily_send_limit': { what: 'Sends per inbox per day (the default of new inboxes)', past: '`429 DAILY_SEND_LIMIT_EXCEEDED`; over SMTP submission `451 4.7.1`' },
  'limits.account_daily_send_limit': { what: 'Sends per account per UTC day, all inboxes together', past: '`429 DAILY_SEND_LIMIT_EXCEEDED`; over SMTP submission `451 4.7.1`' },
  'imap.max_connections': { what: 'IMAP connections in all', past: '`* BYE` at connect' },
  'imap.max_connections_per_ip': { what: 'IMAP connections from one address (IPv6: one /64)', past: '`* BYE` at connect' },
  'imap.connections_per_account': { what: 'Logged-in IMAP sessions of one account (per node)', past: '`NO [LIMIT]` at LOGIN' },
  'imap.max_literal_bytes': { what: 'One IMAP literal (an APPENDed message)', past: '`NO [TOOBIG]` (a non-synchronizing literal: `* BYE`, closed)' },
  'imap.max_line_bytes': { what: 'One IMAP command line, literals apart', past: '`* BYE`, closed' },
  'imap.idle_timeout': { what: 'Silent IMAP client (IDLE included)', past: '`* BYE`, closed' },
  'smtp.max_connections': { what: 'SMTP connections in all', past: '`421` at connect' },
  'smtp.max_connections_per_ip': { what: 'SMTP connections from one address (IPv6: one /64)', past: '`421 4.7.0` at connect' },
  'smtp.max_session_time': { what: 'SMTP session lifetime, however busy', past: '`421 4.4.2`, closed' },
  'smtp.max_junk_commands': { what: 'NOOP/RSET/VRFY/HELP between two MAILs', past: '`421 4.7.0`, closed' },
  'smtp.idle_timeout': { what: 'Silent SMTP client', past: 'closed' },
  'smtp.max_message_bytes': { what: 'Message size', past: '`552 5.3.4`' },
  'smtp.max_recipients': { what: 'Recipients per message', past: '`452`' },
  'smtp.spool_limit': { what: 'Mail waiting in the spool', past: '`451 4.3.1` (the sender retries)' },
  'smtp.memory_budget': {
    what: 'Memory held by SMTP transactions (twelve times what each message in progress holds: at most its first 256 KiB, the rest is on disk)',
    past: '`452 4.3.1` at MAIL (when SIZE= is announced) or after DATA; one transaction alone always passes',
  },
  'smtp.analysis_timeout': {
    what: 'Parsing and SPF/DKIM/DMARC of one received message on a worker',
    past: 'stored unanalysed (raw kept, authentication `permerror`), never retried on the main thread',
  },
  'attachments.text_max_bytes': { what: 'Attachment whose text is extracted', past: '`422 ATTACHMENT_TEXT_FAILED`' },
  'attachments.text_max_chars': { what: 'Extracted text returned', past: 'cut there, `truncated: true`' },
  'attachments.text_timeout': { what: 'Time of one text extraction', past: 'its process is killed; `422 ATTACHMENT_TEXT_FAILED`' },
  'attachments.text_max_memory': { what: 'Memory of one text extraction process (RLIMIT_DATA)', past: 'the process dies; `422 ATTACHMENT_TEXT_FAILED` ("expands too much")' },
  'attachments.text_workers': { what: 'Text extractions running at once', past: 'the rest wait, round robin across accounts' },
  'attachments.text_queue_per_account': { what: 'Text extractions of one account waiting', past: '`503 TEXT_EXTRACTION_BUSY` with `Retry-After`' },
  'attachments.text_queue_wait': { what: 'Wait of one text extraction for a worker', past: '`503 TEXT_EXTRACTION_BUSY` with `Retry-After`' },
  'jobs.concurrency': { what: 'Jobs (sends, webhook deliveries) running at once', past: 'the rest wait in the job table' },
  'jobs.attempt_timeout': { what: 'One attempt of a job (a tarpitting MX, a slow webhook target)', past: 'aborted, counted as a temporary failure and retried on schedule' },
  'outbound.timeout': { what: 'Connection and reply of one SMTP delivery attempt', past: 'the attempt is deferred and retried' },
  'outbound.concurrency_per_domain': { what: 'Deliveries in flight to one recipient domain', past: 'the rest wait' },
  'outbound.mta_sts_timeout': { what: "Fetch of a recipient domain's MTA-STS policy", past: 'no policy this time (sts-policy-fetch-error in the TLS report); a cached one still applies' },
  'outbound.mta_sts_max_bytes': { what: "A recipient domain's MTA-STS policy file", past: 'refused as no policy (sts-policy-invalid in the TLS report); a cached one still applies' },
  'webhooks.timeout': { what: 'One webhook delivery', past: 'failed attempt, retried on schedule' },
  'webhooks.concurrency_per_webhook': { what: 'Deliveries in flight to one webhook', past: 'the rest wait' },
  'database.connections': {
    what: 'PostgreSQL connections for mail (SMTP, the job runner)',
    past: 'the next statement waits for one, up to `database.connect_timeout`; then the SMTP command is answered 451 4.3.0 or the job is retried',
  },
  'database.api_connections': {
    what: 'PostgreSQL connections for API clients (HTTP, MCP, IMAP)',
    past: 'the next statement waits for one, up to `database.connect_timeout`; then `503 SERVICE_UNAVAILABLE` with `Retry-After`',
  },
  'database.connect_timeout': { what: 'Connecting to PostgreSQL', past: 'the connection attempt fails (start-up stops; a request gets `503`)' },
  'database.statement_timeout': { what: 'One PostgreSQL statement', past: 'cancelled by the server; the request answers `503 SERVICE_UNAVAILABLE`' },
  'database.idle_in_transaction_timeout': { what: 'A PostgreSQL transaction left idle', past: 'the server ends its session' },
  'inbound.report_max_bytes': { what: 'A DMARC or TLS-RPT report once decompressed', past: '`550 5.7.1`, nothing stored' },
  'inbound.report_max_records': { what: 'Rows of one DMARC or TLS-RPT report', past: '`550 5.7.1`, nothing stored' },
  'screening.classifier_timeout': { what: 'One answer of the screening classifier', past: 'the built-in verdict stands, with a `classifier` reason; the message is stored' },
  'screening.classifier_max_bytes': { what: 'Text of one message sent to the screening classifier', past: 'cut there' },
};

type Schema = { [key: string]: Field<unknown> | Schema };
type Infer<S> = { -readonly [K in keyof S]: S[K] extends Field<infer T> ? T : Infer<S[K]> };
export type Config = Infer<typeof CONFIG_SCHEMA>;

const isField = (x: unknown): x is Field<unknown> => typeof x === 'object' && x !== null && 'parse' in x;

/** Builds one table; every bad key adds its line to `problems` (all are reported, not just the first). */
function build(schema: Schema, input: Record<string, unknown>, prefix: string, problems: string[]): Record<string, unknown> {
  const check = (fn: () => void) => {
    try {
      fn();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(...err.problems);
    }
  };
  for (const key of Object.keys(input)) {
    if (!(key in schema)) check(() => fail(prefix + key, 'unknown key'));
  }
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(schema)) {
    const value = input[key];
    if (isField(spec)) {
      out[key] = spec.default;
      if (value !== undefined) check(() => (out[key] = spec.parse(value, prefix + key)));
    } else {
      let table = value;
      if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) {
        check(() => fail(prefix + key, 'expected a table'));
        table = undefined;
      }
      out[key] = build(spec, (table ?? {}) as Record<string, unknown>, `${prefix}${key}.`, problems);
    }
  }
  return out;
}

/** Builds a Config from an already-parsed TOML object (or overrides in tests); throws one ConfigError listing every bad key. */
export function configFrom(input: Record<string, unknown> = {}): Config {
  const problems: string[] = [];
  const config = build(CONFIG_SCHEMA as unknown as Schema, input, '', problems) as Config;
  if (problems.length) throw new ConfigError(problems);
  return config;
}

/** The file loadConfig reads for --config `path`: it, else ./mailroom.toml when present, else none (built-in defaults). */
export function configFileOf(path?: string): string | undefined {
  return path ?? (existsSync('mailroom.toml') ? 'mailroom.toml' : undefined);
}

/**
 * Loads the config: the given file (which must exist), else ./mailroom.toml when present,
 * else the embedded defaults.
 */
export function loadConfig(path?: string): Config {
  const file = configFileOf(path);
  if (!file) return withEnvironment(configFrom({}));
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = parseToml(text) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`config file ${file} is not valid TOML: ${(err as Error).message}`);
  }
  return withEnvironment(configFrom(parsed));
}

/** Settings the environment overrides (so a secret need not sit in the file): MAILROOM_DATABASE_URL. */
function withEnvironment(config: Config): Config {
  const url = process.env.MAILROOM_DATABASE_URL;
  if (url === undefined) return config;
  try {
    return { ...config, database: { ...config.database, url: CONFIG_SCHEMA.database.url.parse(url, 'database.url') } };
  } catch (err) {
    throw err instanceof ConfigError ? new ConfigError(err.problems.map((p) => p.replace('config key `database.url`', 'environment variable MAILROOM_DATABASE_URL (overrides database.url)'))) : err;
  }
}

/** Every key path with its field, in schema order (used to render and check the example). */
export function configKeys(): Array<{ key: string; field: Field<unknown> }> {
  const out: Array<{ key: string; field: Field<unknown> }> = [];
  const walk = (schema: Schema, prefix: string) => {
    for (const [key, spec] of Object.entries(schema)) {
      if (isField(spec)) out.push({ key: prefix + key, field: spec });
      else walk(spec, `${prefix}${key}.`);
    }
  };
  walk(CONFIG_SCHEMA as unknown as Schema, '');
  return out;
}

/** config.example.toml as generated from the schema: every key, its default, its description. */
export function renderExampleConfig(): string {
  return renderConfigFile(['mailroom configuration. Every key is optional; the value shown is the default.']);
}

/**
 * A config file in the example's layout (every key under its description, section by section)
 * with the given header comment. Without `values` every key is written with its default (the
 * example). With `values` (key path → value) those keys are set and every other key is written
 * commented out at its default, so a later release's defaults still apply to it (`mailroom init`).
 */
export function renderConfigFile(header: string[], values?: Record<string, string | number | boolean>): string {
  const lines = [...header.map((h) => (h ? `# ${h}` : '#')), ''];
  let section = '';
  for (const { key, field } of configKeys()) {
    const dot = key.lastIndexOf('.');
    const sec = dot === -1 ? '' : key.slice(0, dot);
    const name = key.slice(dot + 1);
    if (sec !== section) {
      lines.push('', `[${sec}]`);
      section = sec;
    }
    const setting = !values ? `${name} = ${field.example}` : key in values ? `${name} = ${JSON.stringify(values[key])}` : `# ${name} = ${field.example}`;
    lines.push(`# ${field.description}`, setting);
  }
  return lines.join('\n').replace(/\n{3,}/g, '\n\n') + '\n';
}
