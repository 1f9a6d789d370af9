// What `serve` tells the operator at start: one block naming the version, the config in use,
// where the data lives, the addresses to reach, and whether mail really leaves the machine
// (human lines on a terminal, one JSON log line otherwise); and the one line a busy or
// forbidden listen address turns into, naming the config key to change.
import { resolve, join } from 'node:path';
import { redactUrl, type Config, type ListenAddress } from './config.ts';
import type { AppContext } from './context.ts';
import { listAllDomains } from './domain/domains/domains.ts';
import { VERSION } from './version.ts';

export interface StartupInfo {
  version: string;
  /** The config file read, or "built-in defaults". */
  config: string;
  dataDir: string;
  database: string;
  http: string;
  dashboard: string;
  smtp: string;
  /** The SMTP submission listener's address, or "off". */
  submission: string;
  /** The Prometheus endpoint's address, or "off". */
  metrics: string;
  /** The IMAP listeners' addresses (absent when both are off). */
  imap?: string;
  outbound: Config['outbound']['mode'];
  relay?: string;
  services: string[];
  /** Things the operator should know now (live sending with nothing verified). */
  warnings: string[];
}

/**
 * How long after start-up the background passes (housekeeping's sweep, the domain re-check and
 * the shared DKIM key) first run: right after "started" they took CPU from the first requests.
 */
export const AFTER_START_MS = 1000;

const hostPort = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

export const LIVE_SENDING_WARNING =
  'sending is live (outbound.mode = "email") and no domain is verified: mail sent through the API leaves this machine for real ' +
  '(and from a home connection may wait on a blocked port 25); to try mailroom without sending anything, set outbound.mode = "dry-run" in the config';

export async function describeStartup(
  ctx: AppContext,
  bound: { httpUrl: string; smtpPort: number; submissionPort: number; metricsPort: number; services: string[]; imapPort?: number; imapTlsPort?: number },
  configFile: string | undefined,
): Promise<StartupInfo> {
  const c = ctx.config;
  const dataDir = resolve(c.data_dir);
  const warnings: string[] = [];
  if (c.outbound.mode === 'email' && !(await listAllDomains(ctx)).some((d) => d.sendingStatus === 'verified')) warnings.push(LIVE_SENDING_WARNING);
  return {
    version: VERSION,
    config: configFile ? resolve(configFile) : 'built-in defaults',
    dataDir,
    // PostgreSQL's URL without its password; else the embedded file.
    database: c.database.url ? redactUrl(c.database.url) : join(dataDir, 'mailroom.db'),
    http: bound.httpUrl,
    dashboard: `${bound.httpUrl}/dashboard`,
    smtp: hostPort(c.smtp.listen!.host, bound.smtpPort),
    submission: c.submission.listen ? hostPort(c.submission.listen.host, bound.submissionPort) : 'off',
    metrics: c.metrics.listen ? hostPort(c.metrics.listen.host, bound.metricsPort) : 'off',
    outbound: c.outbound.mode,
    ...(c.outbound.relay ? { relay: redactUrl(c.outbound.relay) } : {}),
    ...(c.imap.listen || c.imap.tls_listen ? { imap: imapLine(c, bound.imapPort ?? 0, bound.imapTlsPort ?? 0) } : {}),
    services: bound.services,
    warnings,
  };
}

/** "0.0.0.0:143 (STARTTLS), 0.0.0.0:993 (TLS)": the IMAP listeners that are on. */
function imapLine(c: Config, port: number, tlsPort: number): string {
  const starttls = c.smtp.tls_cert && c.smtp.tls_key ? 'STARTTLS' : 'no TLS: loopback logins only';
  return [...(c.imap.listen ? [`${hostPort(c.imap.listen.host, port)} (${starttls})`] : []), ...(c.imap.tls_listen ? [`${hostPort(c.imap.tls_listen.host, tlsPort)} (TLS)`] : [])].join(', ');
}

/** The block for a terminal: aligned lines, then one "warning:" line per warning. */
export function renderStartup(info: StartupInfo): string {
  const outbound = info.outbound === 'dry-run' ? 'dry-run (nothing leaves this machine)' : `email (live: mail leaves this machine${info.relay ? ` through ${info.relay}` : ', direct to MX'})`;
  const rows: Array<[string, string]> = [
    ['config', info.config],
    ['data dir', info.dataDir],
    ['database', info.database],
    ['HTTP API', info.http],
    ['dashboard', info.dashboard],
    ['SMTP', info.smtp],
    ...(info.submission === 'off' ? [] : [['submission', info.submission] as [string, string]]),
    ...(info.imap ? [['IMAP', info.imap] as [string, string]] : []),
    ['metrics', info.metrics],
    ['outbound', outbound],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return [`mailroom ${info.version} started`, ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`), ...info.warnings.map((w) => `warning: ${w}`), ''].join('\n');
}

/** A listener that could not bind: one line naming the address, the reason and the key to change. */
export class ListenError extends Error {
  readonly key: string;
  readonly address: ListenAddress;
  readonly code: string;
  constructor(key: string, address: ListenAddress, code: string) {
    const where = hostPort(address.host, address.port);
    const reason =
      code === 'EADDRINUSE'
        ? 'the address is already in use (another mailroom, or another program, listens there)'
        : code === 'EACCES'
          ? `permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)`
          : code === 'EADDRNOTAVAIL'
            ? 'no network interface of this machine has that address'
            : code;
    super(`cannot listen on ${where} for ${key}: ${reason}; set \`${key}\` in the config to another address`);
    this.key = key;
    this.address = address;
    this.code = code;
  }
}

const LISTEN_CODES = new Set(['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL']);

/** The ListenError for a failed bind, or the error itself when it is something else. */
export function listenFailure(err: unknown, key: string, address: ListenAddress | null): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return address && code && LISTEN_CODES.has(code) ? new ListenError(key, address, code) : err;
}
