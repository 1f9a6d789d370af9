// One delivery attempt: hand a signed message to one MX host (or to `outbound.relay`) over
// SMTP with nodemailer, and report what the server said for each recipient. Connections are
// pooled per MX host and reused across messages; STARTTLS is used whenever the server offers
// it (opportunistic, RFC 3207; certificates of MX hosts are not checked, as MTAs do without
// DANE/MTA-STS). Under an MTA-STS policy (`verify`) TLS is required with a WebPKI-valid
// certificate for the MX name; under DANE (`dane`) with one matching the TLSA records, on a
// connection of its own. The pools are closed by the `outbound` service at shutdown.
import { Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type MimeNode from 'nodemailer/lib/mime-node';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type SMTPPool from 'nodemailer/lib/smtp-pool';
import type { TlsaRecord } from '../dns.ts';
import { checkDane, peerChain } from './dane.ts';
import type { AppContext } from '../context.ts';
import type { Service } from '../context.ts';
import { trustedCas } from './mta-sts.ts';
import type { Source } from './source-cache.ts';

export interface Envelope {
  /** MAIL FROM: where bounces go. */
  from: string;
  to: string[];
  /** RFC 3461 ENVID: returned in DSNs so a bounce names the message (sent when offered). */
  envid?: string;
}

export interface RecipientReply {
  accepted: boolean;
  code?: number;
  response: string;
}

export type AttemptResult =
  /** The server took part in the transaction: a reply for each recipient. */
  | { kind: 'replies'; host: string; replies: Map<string, RecipientReply> }
  /** No transaction with this host (refused, timed out, dropped, TLS failed, 421 greeting). */
  | { kind: 'unreachable'; host: string; error: string; errorCode?: string; code?: number; response?: string };

export interface Target {
  /** MX host name (TLS SNI, logs). */
  name: string;
  /** Address to connect to. */
  address: string;
  port: number;
  /** Never STARTTLS: the second try after a failed TLS handshake with this host. */
  plaintext?: boolean;
  /**
   * TLS is required with a certificate valid for `name` (MTA-STS, RFC 8461 §4.2): no
   * plaintext retry, and a failed check makes the host unreachable with its reason.
   */
  verify?: boolean;
  /** DANE (RFC 7672): TLS required and the certificate checked against these TLSA records. */
  dane?: TlsaRecord[];
}

interface Pool {
  transport: SMTPPool;
  /** Attempts using it right now, and when it was last used: idle pools are closed. */
  inUse: number;
  lastUsed: number;
}

interface Pools {
  byKey: Map<string, Pool>;
  lastSweep: number;
}

/** A pool unused this long is closed, so pools of every domain ever mailed do not pile up. */
const POOL_IDLE_MS = 120_000;

const pools = new WeakMap<AppContext, Pools>();

function poolsOf(ctx: AppContext): Pools {
  let p = pools.get(ctx);
  if (!p) pools.set(ctx, (p = { byKey: new Map(), lastSweep: 0 }));
  return p;
}

function sweepIdle(p: Pools, now: number): void {
  if (now - p.lastSweep < POOL_IDLE_MS / 4) return;
  p.lastSweep = now;
  for (const [key, pool] of p.byKey) {
    if (pool.inUse === 0 && now - pool.lastUsed > POOL_IDLE_MS) {
      pool.transport.close();
      p.byKey.delete(key);
    }
  }
}

// Classes, so loaded by the first delivery: in the single executable they travel in the "send" chunk (build/build.ts).
let smtpPool: Promise<typeof import('nodemailer/lib/smtp-pool/index.js')> | undefined;
let mimeNode: Promise<typeof import('nodemailer/lib/mime-node/index.js')> | undefined;

async function poolFor(ctx: AppContext, target: Target | 'relay'): Promise<Pool> {
  const p = poolsOf(ctx);
  const now = Date.now();
  sweepIdle(p, now);
  const key = target === 'relay' ? 'relay' : `${target.name}|${target.address}|${target.port}${target.plaintext ? '|plain' : ''}${target.verify ? '|verify' : ''}`;
  const existing = p.byKey.get(key);
  if (existing) return existing;
  const { default: SmtpPool } = await (smtpPool ??= import('nodemailer/lib/smtp-pool/index.js'));
  // Another attempt may have made it while the module loaded.
  const made = p.byKey.get(key);
  if (made) return made;
  let t: SMTPPool;
  const o = ctx.config.outbound;
  const common = {
    // One pool per MX host; the job runner already bounds deliveries per recipient domain.
    maxConnections: o.concurrency_per_domain,
    maxMessages: 1000,
    idleTimeout: 30_000,
    name: ctx.config.hostname,
    connectionTimeout: o.timeout,
    greetingTimeout: o.timeout,
    socketTimeout: o.timeout,
    opportunisticTLS: true,
    logger: false,
  };
  if (target === 'relay') {
    const url = new URL(o.relay);
    t = new SmtpPool({
      ...common,
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: Number(url.port) || (url.protocol === 'smtps:' ? 465 : 587),
      secure: url.protocol === 'smtps:',
      auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
      // A smarthost is a known party holding our credentials: its certificate is checked.
      tls: { rejectUnauthorized: o.relay_verify_tls },
    });
  } else if (target.verify) {
    t = new SmtpPool({
      ...common,
      host: target.address,
      port: target.port,
      requireTLS: true,
      opportunisticTLS: false,
      tls: { servername: target.name, rejectUnauthorized: true, ca: trustedCas(ctx) },
    });
  } else {
    t = new SmtpPool({
      ...common,
      host: target.address,
      port: target.port,
      ignoreTLS: !!target.plaintext,
      tls: { servername: /^[\d.:]+$/.test(target.name) ? undefined : target.name, rejectUnauthorized: false },
    });
  }
  const pool: Pool = { transport: t, inUse: 0, lastUsed: now };
  p.byKey.set(key, pool);
  return pool;
}

/** What SMTPPool.send takes: nodemailer's MailMessage. */
type PoolMessage = Parameters<SMTPPool['send']>[0];

/** Parses and normalises envelopes as nodemailer does (an IDN domain as its A-label); one instance serves all, synchronously. */
let envelopes: MimeNode | undefined;

/**
 * `raw` as the pool's message, sent as it is, and what releases the streams it opened. The pool
 * reads only these four methods of the MIME tree that nodemailer's sendMail would build
 * (smtp-pool and pool-resource in nodemailer 10); sendMail would compile the stored source into
 * a tree again (its address headers parsed, a random boundary drawn) and stream it through three
 * transforms at every delivery, where the bytes need no change: bench/ scenario (c), about
 * 0.2 ms of the event loop per delivery.
 */
async function rawMessage(envelope: Envelope, raw: Source, signal?: AbortSignal): Promise<{ mail: PoolMessage; release: () => void }> {
  if (!envelopes) {
    const { default: Node } = await (mimeNode ??= import('nodemailer/lib/mime-node/index.js'));
    envelopes ??= new Node();
  }
  const smtp = envelopes.setEnvelope({ from: envelope.from, to: envelope.to }).getEnvelope();
  const opened: Readable[] = [];
  const message: Pick<MimeNode, 'getHeader' | 'messageId' | 'getEnvelope' | 'createReadStream'> = {
    getHeader: () => '',
    messageId: () => '',
    // A new object each time: the pool adds the DSN parameters to it.
    getEnvelope: () => ({ from: smtp.from, to: [...smtp.to] }),
    // A new stream each time: the pool sends a message again over another connection when the
    // one it took was closed before a byte of it was read.
    createReadStream: () => {
      const stream = typeof raw === 'function' ? raw() : Readable.from([raw], { objectMode: false });
      opened.push(stream);
      return stream;
    },
  };
  const mail = {
    data: {
      dsn: envelope.envid ? { id: envelope.envid, return: 'headers' } : undefined,
      // The job's deadline (jobs.attempt_timeout): the pool closes the connection carrying this
      // message, however slowly the server trickles its replies, and the send fails EABORT.
      signal,
    },
    message,
  } as unknown as PoolMessage;
  // A send that failed midway leaves its stream unread, and a large source's file open behind it.
  return { mail, release: () => opened.forEach((stream) => stream.destroy()) };
}

interface SmtpError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  command?: string;
  rejectedErrors?: Array<SmtpError & { recipient?: string }>;
}

/** The bytes of one attempt: a large source is read anew for each (src/outbound/source-cache.ts). */
const bytesOf = (raw: Source) => (typeof raw === 'function' ? raw() : raw);

const oneLine = (s: string | undefined) => (s ?? '').replace(/\s+/g, ' ').trim().slice(0, 500);

/**
 * Sends `raw` to every recipient of `envelope` through `target` (an MX host or the relay).
 * Opportunistic TLS means plaintext is acceptable: when an MX host offers STARTTLS but the
 * handshake fails, the same host is tried once more without it (as Postfix does at TLS
 * security level "may"), rather than never delivering to a host with a broken TLS setup.
 */
export async function deliverAttempt(ctx: AppContext, target: Target | 'relay', envelope: Envelope, raw: Source, signal?: AbortSignal): Promise<AttemptResult> {
  if (target !== 'relay' && target.dane) return attemptDane(ctx, target, target.dane, envelope, raw, signal);
  const res = await attemptOnce(ctx, target, envelope, raw, signal);
  if (res.kind === 'unreachable' && target !== 'relay' && !target.plaintext && !target.verify && isTlsFailure(res) && !signal?.aborted) {
    ctx.log.warn('STARTTLS failed, retrying without TLS', { host: res.host, error: res.error });
    return attemptOnce(ctx, { ...target, plaintext: true }, envelope, raw, signal);
  }
  return res;
}

/**
 * The STARTTLS step failed (an error during the upgrade, a handshake that never finished, or,
 * for a `verify` target, a certificate the check refused).
 */
export const isTlsFailure = (res: { errorCode?: string; error: string }) => res.errorCode === 'ETLS' || /TLS handshake|certificate|altnames/i.test(res.error);

async function attemptOnce(ctx: AppContext, target: Target | 'relay', envelope: Envelope, raw: Source, signal?: AbortSignal): Promise<AttemptResult> {
  const host = target === 'relay' ? 'relay' : `${target.name} [${target.address}]:${target.port}`;
  let pool: Pool;
  try {
    pool = await poolFor(ctx, target);
  } catch (err) {
    // Only a malformed outbound.relay URL gets here.
    return { kind: 'unreachable', host, error: `cannot use outbound.relay: ${(err as Error).message}` };
  }
  pool.inUse++;
  try {
    const { mail, release } = await rawMessage(envelope, raw, signal);
    try {
      const info = await new Promise<{ response?: string }>((resolve, reject) => pool.transport.send(mail, (err, info) => (err ? reject(err) : resolve(info!))));
      return fromInfo(host, envelope, info);
    } finally {
      release();
    }
  } catch (err) {
    return fromError(host, envelope, err as SmtpError);
  } finally {
    pool.inUse--;
    pool.lastUsed = Date.now();
  }
}

/** The replies of a transaction that ended with the message accepted for some recipients. */
function fromInfo(host: string, envelope: Envelope, info: { response?: string }): AttemptResult {
  const replies = new Map<string, RecipientReply>();
  const rejectedErrors = ((info as { rejectedErrors?: SmtpError[] }).rejectedErrors ?? []) as Array<SmtpError & { recipient?: string }>;
  for (const e of rejectedErrors) {
    if (e.recipient) replies.set(e.recipient.toLowerCase(), { accepted: false, code: e.responseCode, response: oneLine(e.response ?? e.message) });
  }
  const code = Number(/^\d{3}/.exec(info.response ?? '')?.[0]) || 250;
  for (const to of envelope.to) {
    if (!replies.has(to.toLowerCase())) replies.set(to.toLowerCase(), { accepted: true, code, response: oneLine(info.response) || '250 OK' });
  }
  return { kind: 'replies', host, replies };
}

/** What a failed send means: refusals for each recipient, or no transaction at all. */
function fromError(host: string, envelope: Envelope, err: SmtpError): AttemptResult {
  const replies = new Map<string, RecipientReply>();
  if (err.rejectedErrors?.length) {
    // Every recipient was refused at RCPT TO: each has its own reply.
    for (const e of err.rejectedErrors) {
      if (e.recipient) replies.set(e.recipient.toLowerCase(), { accepted: false, code: e.responseCode, response: oneLine(e.response ?? e.message) });
    }
    for (const to of envelope.to) {
      if (!replies.has(to.toLowerCase())) replies.set(to.toLowerCase(), { accepted: false, code: err.responseCode, response: oneLine(err.response ?? err.message) });
    }
    return { kind: 'replies', host, replies };
  }
  if (err.responseCode && (err.command === 'MAIL FROM' || err.command === 'DATA' || err.code === 'EMESSAGE' || err.code === 'EENVELOPE')) {
    // The transaction ran and the server refused the sender or the message: the same
    // reply counts for every recipient of this attempt.
    for (const to of envelope.to) replies.set(to.toLowerCase(), { accepted: false, code: err.responseCode, response: oneLine(err.response) });
    return { kind: 'replies', host, replies };
  }
  return { kind: 'unreachable', host, error: oneLine(err.response || err.message), errorCode: err.code, code: err.responseCode, response: err.response };
}

/**
 * A DANE-authenticated attempt (RFC 7672): its own connection, not a pooled one, because the
 * certificate is checked against the TLSA records after the handshake and before MAIL FROM,
 * which nodemailer's pool gives no place for. STARTTLS is required; a certificate that matches
 * no record ends the connection before anything is sent.
 */
async function attemptDane(ctx: AppContext, target: Target, records: TlsaRecord[], envelope: Envelope, raw: Source, signal?: AbortSignal): Promise<AttemptResult> {
  const host = `${target.name} [${target.address}]:${target.port}`;
  const o = ctx.config.outbound;
  const conn = new SMTPConnection({
    host: target.address,
    port: target.port,
    name: ctx.config.hostname,
    requireTLS: true,
    connectionTimeout: o.timeout,
    greetingTimeout: o.timeout,
    socketTimeout: o.timeout,
    logger: false,
    // Authentication is DANE's, below: the WebPKI chain and name checks do not apply (§3.1).
    tls: { servername: target.name, rejectUnauthorized: false },
  });
  const abort = () => conn.close();
  signal?.addEventListener('abort', abort, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      conn.once('error', reject);
      conn.connect(() => {
        conn.off('error', reject);
        resolve();
      });
    });
    const socket = (conn as unknown as { _socket?: TLSSocket })._socket;
    const problem =
      !conn.secure || !socket?.getPeerCertificate ? 'STARTTLS required by DANE did not happen' : checkDane(records, peerChain(socket.getPeerCertificate(true)), target.name, ctx.clock.now());
    if (problem) return { kind: 'unreachable', host, error: `DANE: ${problem}`, errorCode: 'EDANE' };
    const info = await new Promise<{ response?: string }>((resolve, reject) => {
      conn.once('error', reject);
      conn.send(
        { from: envelope.from, to: envelope.to, dsn: envelope.envid ? { envid: envelope.envid, ret: 'HDRS' } : undefined } as Parameters<SMTPConnection['send']>[0],
        bytesOf(raw),
        (err, info) => (err ? reject(err) : resolve(info)),
      );
    });
    return fromInfo(host, envelope, info);
  } catch (err) {
    const res = fromError(host, envelope, err as SmtpError);
    return res.kind === 'unreachable' && isTlsFailure(res) ? { ...res, error: `DANE: ${res.error}` } : res;
  } finally {
    signal?.removeEventListener('abort', abort);
    conn.quit();
  }
}

/** Closes the connection pools at shutdown (and lets idle MX connections go). */
export function createOutboundService(ctx: AppContext): Service {
  return {
    name: 'outbound',
    async start() {},
    async stop() {
      const p = pools.get(ctx);
      if (!p) return;
      for (const pool of p.byKey.values()) pool.transport.close();
      p.byKey.clear();
    },
  };
}
