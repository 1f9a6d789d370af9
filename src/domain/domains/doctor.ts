// `mailroom doctor`: checks everything that makes mail fail or land in spam and says how to
// fix each failure: the hostname's address records, reverse DNS, port 25 in and out (or the
// relay), the STARTTLS certificate, and each domain's records as published versus expected.
// Every network step is bounded by a short timeout; DNS goes through `dns.servers`.
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP, Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import ipaddr from 'ipaddr.js';
import type { AppContext } from '../../context.ts';
import { DnsUnavailableError } from '../../dns.ts';
import { resolveMx } from '../../outbound/mx.ts';
import { ensureSharedDkimKey } from './dkim-keys.ts';
import { normalizeHost, zoneLine, type DnsRecord, type RecordCheck, type RecordRole } from './domain-check.ts';
import { dnsRecordsFor, inspectRecords, listAllDomains } from './domains.ts';
import { nonPublicReason } from '../webhooks/webhook-targets.ts';
import { countOutcomesSince } from '../../store/repo/reports.ts';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface DoctorCheck {
  /**
   * Stable identifier for scripts: hostname, reverse-dns, smtp-inbound, smtp-outbound, tls,
   * domain; the bulk-sender checklist: bulk-alignment, fcrdns, bulk-tls, complaint-rate.
   */
  id: string;
  title: string;
  status: CheckStatus;
  /** What was found. */
  detail: string;
  /** How to fix it (warn and fail only). */
  fix?: string;
  /** Domain checks: the domain and the record's role. */
  domain?: string;
  role?: RecordRole;
}

export interface DoctorOptions {
  /** This host's public address, when its interfaces do not show it (NAT). */
  address?: string;
  /** Port the internet reaches the SMTP listener on (25 unless a firewall forwards another). */
  inboundPort?: number;
  /** A domain whose MX is asked whether outbound port 25 is open (default gmail.com). */
  probeDomain?: string;
  /** Time limit of one connection (ms). */
  timeoutMs?: number;
  /** Certificates expiring within this many days are reported (default 14). */
  expiryWarnDays?: number;
}

export interface DoctorReport {
  hostname: string;
  checks: DoctorCheck[];
  summary: Record<CheckStatus, number>;
}

/** RFC 6761/2606 names that can never be reached from the internet. */
const RESERVED = /(^|\.)(localhost|test|invalid|local|example|internal|lan|home\.arpa)$/;

const explain = (err: unknown) => (err instanceof DnsUnavailableError ? `DNS did not answer (${err.code})` : ((err as Error)?.message ?? String(err)));

/** The first reply of an SMTP server (RFC 5321 §4.2: "220" greeting, possibly multi-line). */
export function smtpGreeting(host: string, port: number, timeoutMs: number): Promise<{ ok: true; greeting: string } | { ok: false; error: string; code?: string }> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let buf = '';
    let done = false;
    const finish = (r: { ok: true; greeting: string } | { ok: false; error: string; code?: string }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (r.ok) socket.end('QUIT\r\n');
      socket.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => finish({ ok: false, error: `no answer within ${timeoutMs} ms`, code: 'ETIMEDOUT' }), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      buf += chunk.toString('latin1');
      const lines = buf.split('\r\n');
      // The reply ends at the line whose code is followed by a space (RFC 5321 §4.2.1).
      const last = lines.slice(0, -1).find((l) => /^\d{3} /.test(l) || /^\d{3}$/.test(l));
      if (last) finish(last.startsWith('220') ? { ok: true, greeting: last.slice(4).trim() } : { ok: false, error: `answered "${last.trim()}" instead of 220` });
      else if (buf.length > 4096) finish({ ok: false, error: 'not an SMTP server (no reply line)' });
    });
    socket.on('error', (err: NodeJS.ErrnoException) => finish({ ok: false, error: err.message, code: err.code }));
    socket.on('close', () => finish({ ok: false, error: 'connection closed before a greeting' }));
    socket.connect({ host, port });
  });
}

/** Non-internal addresses of this host's interfaces. */
function localAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((i) => i && !i.internal)
    .map((i) => i!.address);
}

async function addressesOf(ctx: AppContext, name: string): Promise<string[]> {
  const [a, aaaa] = await Promise.all([ctx.dns.a(name), ctx.dns.aaaa(name).catch(() => [] as string[])]);
  return [...a, ...aaaa];
}

interface HostFacts {
  /** Addresses the hostname resolves to ([] when none or unknown). */
  resolved: string[];
  /** Addresses to check PTR for and connect to: this host's public ones among `resolved`. */
  own: string[];
}

async function checkHostname(ctx: AppContext, opts: DoctorOptions, out: DoctorCheck[]): Promise<HostFacts> {
  const host = normalizeHost(ctx.config.hostname);
  const base = { id: 'hostname', title: `hostname ${host} resolves to this host` };
  if (!host.includes('.') || RESERVED.test(host)) {
    out.push({
      ...base,
      status: 'fail',
      detail: `hostname is "${host}", a name the internet cannot resolve`,
      fix: 'set `hostname` in the config to this server\'s public name, e.g. hostname = "mail.example.com", and publish an A record for it',
    });
    return { resolved: [], own: [] };
  }
  let resolved: string[];
  try {
    resolved = await addressesOf(ctx, host);
  } catch (err) {
    out.push({ ...base, status: 'warn', detail: explain(err), fix: 'check `dns.servers` and that the resolvers answer, then run doctor again' });
    return { resolved: [], own: [] };
  }
  const mine = opts.address ? [opts.address] : localAddresses();
  if (!resolved.length) {
    const target = opts.address ?? mine.find((a) => !nonPublicReason(a)) ?? "<this server's public IP>";
    out.push({ ...base, status: 'fail', detail: 'no A or AAAA record', fix: `publish ${host}. 3600 IN ${isIP(target) === 6 ? 'AAAA' : 'A'} ${target}` });
    return { resolved, own: [] };
  }
  const own = resolved.filter((a) => mine.includes(a));
  if (own.length) {
    out.push({ ...base, status: 'ok', detail: `${host} → ${resolved.join(', ')}` });
    return { resolved, own };
  }
  const publicMine = mine.filter((a) => !nonPublicReason(a));
  if (!opts.address && !publicMine.length) {
    out.push({
      ...base,
      status: 'warn',
      detail: `${host} → ${resolved.join(', ')}; this host's interfaces have only private addresses (${mine.join(', ') || 'none'}), so it may be behind NAT`,
      fix: 'run `mailroom doctor --address <public IP>` to check against the public address',
    });
    // Still check PTR and port 25 against what the name points at.
    return { resolved, own: resolved };
  }
  out.push({
    ...base,
    status: 'fail',
    detail: `${host} → ${resolved.join(', ')}, but this host's addresses are ${(opts.address ? [opts.address] : publicMine).join(', ')}`,
    fix: `point the A/AAAA record of ${host} at ${(opts.address ? [opts.address] : publicMine)[0]}`,
  });
  return { resolved, own: [] };
}

async function checkReverseDns(ctx: AppContext, facts: HostFacts, out: DoctorCheck[]): Promise<void> {
  const host = normalizeHost(ctx.config.hostname);
  const title = 'reverse DNS (PTR) of the public address names the hostname';
  if (!facts.own.length) {
    out.push({ id: 'reverse-dns', title, status: 'skip', detail: 'no public address of this host known (see the hostname check)' });
    return;
  }
  for (const ip of facts.own.slice(0, 2)) {
    try {
      const names = (await reverseLookup(ctx, ip)).map(normalizeHost);
      if (names.includes(host)) out.push({ id: 'reverse-dns', title, status: 'ok', detail: `${ip} → ${host}` });
      else
        out.push({
          id: 'reverse-dns',
          title,
          status: 'fail',
          detail: names.length ? `PTR of ${ip} is ${names.join(', ')}, not ${host}` : `${ip} has no PTR record`,
          fix: `set the reverse DNS of ${ip} to ${host} in your VPS provider's panel (receivers treat mail from an address without a matching PTR as spam)`,
        });
    } catch (err) {
      out.push({ id: 'reverse-dns', title, status: 'warn', detail: `PTR of ${ip}: ${explain(err)}`, fix: 'run doctor again when DNS answers' });
    }
  }
}

/**
 * PTR names of `ip` asked of DNS itself (RFC 1035 §3.5 in-addr.arpa, RFC 3596 §2.5 ip6.arpa).
 * Not a reverse() call: that answers from /etc/hosts first, which often maps the host's own
 * address to its name while the internet sees no PTR at all.
 */
async function reverseLookup(ctx: AppContext, ip: string): Promise<string[]> {
  const addr = ipaddr.parse(ip);
  const name =
    addr.kind() === 'ipv4'
      ? `${addr.toString().split('.').reverse().join('.')}.in-addr.arpa`
      : `${(addr as ipaddr.IPv6).parts
          .map((p) => p.toString(16).padStart(4, '0'))
          .join('')
          .split('')
          .reverse()
          .join('.')}.ip6.arpa`;
  try {
    return (await ctx.dns.raw(name, 'PTR')) as string[];
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'ERROR';
    if (['ENOTFOUND', 'ENODATA', 'ENONAME', 'NXDOMAIN'].includes(code)) return [];
    throw new DnsUnavailableError(name, 'PTR', code);
  }
}

const LOOPBACK = /^(127\.|::1$|localhost$)/;

async function checkInbound(ctx: AppContext, facts: HostFacts, opts: Required<Pick<DoctorOptions, 'inboundPort' | 'timeoutMs'>>, out: DoctorCheck[]): Promise<void> {
  const listen = ctx.config.smtp.listen;
  const title = `port ${opts.inboundPort} reachable for inbound mail`;
  if (!listen) {
    out.push({ id: 'smtp-inbound', title, status: 'fail', detail: 'smtp.listen is not set: no SMTP listener', fix: 'set smtp.listen = "0.0.0.0:25"' });
    return;
  }
  if (LOOPBACK.test(listen.host)) {
    out.push({
      id: 'smtp-inbound',
      title,
      status: 'fail',
      detail: `smtp.listen is ${listen.host}:${listen.port}: only this machine can connect`,
      fix: 'set smtp.listen = "0.0.0.0:25" (the systemd unit grants the capability to bind port 25)',
    });
    return;
  }
  // Only this host's own address is probed: when the name points elsewhere, connecting there
  // would test somebody else's server.
  const target = facts.own[0];
  if (!target) {
    out.push({ id: 'smtp-inbound', title, status: 'skip', detail: 'the hostname does not resolve to this host (see the hostname check)' });
    return;
  }
  const r = await smtpGreeting(target, opts.inboundPort, opts.timeoutMs);
  if (r.ok) {
    const note = listen.port !== opts.inboundPort ? ` (listener on ${listen.port}; make sure ${opts.inboundPort} is forwarded to it)` : '';
    out.push({
      id: 'smtp-inbound',
      title,
      status: 'ok',
      detail: `${target}:${opts.inboundPort} greets with "${r.greeting}"${note}; tested from this host, so a provider firewall in front of it is not seen`,
    });
    return;
  }
  out.push({
    id: 'smtp-inbound',
    title,
    status: 'fail',
    detail: `${target}:${opts.inboundPort}: ${r.error}`,
    fix:
      r.code === 'ECONNREFUSED'
        ? `nothing listens on port ${opts.inboundPort}: start \`mailroom serve\` with smtp.listen = "0.0.0.0:25"`
        : `open port ${opts.inboundPort}/tcp in the firewall (e.g. \`ufw allow 25/tcp\`) and in the provider's security group`,
  });
}

async function checkOutbound(ctx: AppContext, opts: Required<Pick<DoctorOptions, 'probeDomain' | 'timeoutMs'>>, out: DoctorCheck[]): Promise<void> {
  const o = ctx.config.outbound;
  if (o.mode === 'dry-run') {
    out.push({ id: 'smtp-outbound', title: 'outbound mail can leave this host', status: 'skip', detail: 'outbound.mode is "dry-run": nothing is sent' });
    return;
  }
  if (o.relay) {
    let url: URL;
    try {
      url = new URL(o.relay);
    } catch {
      out.push({ id: 'smtp-outbound', title: 'the relay answers', status: 'fail', detail: 'outbound.relay is not a URL', fix: 'write it as smtp://user:pass@host:587' });
      return;
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port) || (url.protocol === 'smtps:' ? 465 : 587);
    const title = `the relay ${host}:${port} answers`;
    if (url.protocol === 'smtps:') {
      // Implicit TLS: a plain connection proves the port is open but cannot read the greeting.
      const r = await new Promise<string | undefined>((resolve) => {
        const s = new Socket();
        const t = setTimeout(() => (s.destroy(), resolve(`no connection within ${opts.timeoutMs} ms`)), opts.timeoutMs);
        s.once('connect', () => (clearTimeout(t), s.destroy(), resolve(undefined)));
        s.once('error', (e) => (clearTimeout(t), resolve(e.message)));
        s.connect({ host, port });
      });
      out.push(
        r
          ? { id: 'smtp-outbound', title, status: 'fail', detail: r, fix: 'check outbound.relay and that this host may connect to it' }
          : { id: 'smtp-outbound', title, status: 'ok', detail: 'port open (implicit TLS)' },
      );
      return;
    }
    const r = await smtpGreeting(host, port, opts.timeoutMs);
    out.push(
      r.ok
        ? { id: 'smtp-outbound', title, status: 'ok', detail: `greets with "${r.greeting}"` }
        : { id: 'smtp-outbound', title, status: 'fail', detail: r.error, fix: 'check outbound.relay (host, port) and that this host may connect to it' },
    );
    return;
  }
  const title = `outbound port ${o.mx_port} open (direct delivery to MX hosts)`;
  let target: { name: string; address: string } | undefined;
  try {
    const route = await resolveMx(ctx, opts.probeDomain);
    if (route.kind === 'hosts') target = { name: route.hosts[0].name, address: route.hosts[0].addresses[0] };
  } catch (err) {
    out.push({ id: 'smtp-outbound', title, status: 'warn', detail: `MX of ${opts.probeDomain}: ${explain(err)}`, fix: 'check `dns.servers`, then run doctor again' });
    return;
  }
  if (!target) {
    out.push({ id: 'smtp-outbound', title, status: 'warn', detail: `${opts.probeDomain} has no usable MX to probe`, fix: 'pass --probe-domain with a domain that receives mail' });
    return;
  }
  const r = await smtpGreeting(target.address, o.mx_port, opts.timeoutMs);
  if (r.ok) out.push({ id: 'smtp-outbound', title, status: 'ok', detail: `${target.name} [${target.address}]:${o.mx_port} greets with "${r.greeting}"` });
  else
    out.push({
      id: 'smtp-outbound',
      title,
      status: 'fail',
      detail: `${target.name} [${target.address}]:${o.mx_port}: ${r.error}`,
      fix: 'many VPS providers block outbound port 25: ask yours to lift the block, or set outbound.relay = "smtp://user:pass@smtp.provider.example:587"',
    });
}

function checkTls(ctx: AppContext, warnDays: number, out: DoctorCheck[]): void {
  const { tls_cert: certPath, tls_key: keyPath } = ctx.config.smtp;
  const host = normalizeHost(ctx.config.hostname);
  const title = 'STARTTLS certificate valid for the hostname';
  if (!certPath || !keyPath) {
    out.push({
      id: 'tls',
      title,
      status: 'warn',
      detail: 'STARTTLS is not offered (smtp.tls_cert / smtp.tls_key not set): mail to this host travels in clear text',
      fix: `get a certificate for ${host} (e.g. certbot certonly --standalone -d ${host}) and set smtp.tls_cert and smtp.tls_key`,
    });
    return;
  }
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(readFileSync(certPath));
  } catch (err) {
    out.push({ id: 'tls', title, status: 'fail', detail: `cannot read ${certPath}: ${(err as Error).message}`, fix: 'point smtp.tls_cert at a readable PEM certificate file' });
    return;
  }
  try {
    if (!cert.checkPrivateKey(createPrivateKey(readFileSync(keyPath)))) {
      out.push({ id: 'tls', title, status: 'fail', detail: `${keyPath} is not the key of ${certPath}`, fix: 'use the private key issued with this certificate (privkey.pem beside fullchain.pem)' });
      return;
    }
  } catch (err) {
    out.push({ id: 'tls', title, status: 'fail', detail: `cannot read ${keyPath}: ${(err as Error).message}`, fix: 'point smtp.tls_key at a readable PEM private key (readable by the service user)' });
    return;
  }
  const now = ctx.clock.now().getTime();
  const notAfter = Date.parse(cert.validTo);
  const notBefore = Date.parse(cert.validFrom);
  const days = Math.floor((notAfter - now) / 86_400_000);
  const renew = `renew it (certbot renew) and make sure the new files reach ${certPath}; mailroom picks them up without a restart`;
  if (notAfter <= now) {
    out.push({ id: 'tls', title, status: 'fail', detail: `expired on ${new Date(notAfter).toISOString()}`, fix: renew });
    return;
  }
  if (notBefore > now) {
    out.push({ id: 'tls', title, status: 'fail', detail: `not valid before ${new Date(notBefore).toISOString()}`, fix: 'check the system clock, or use a certificate already valid' });
    return;
  }
  if (!cert.checkHost(host)) {
    out.push({
      id: 'tls',
      title,
      status: 'fail',
      detail: `the certificate is for ${cert.subjectAltName ?? cert.subject.replace(/\n/g, ', ')}, not ${host}`,
      fix: `get a certificate whose names include ${host}`,
    });
    return;
  }
  if (days < warnDays) {
    out.push({ id: 'tls', title, status: 'warn', detail: `expires in ${days} day(s), on ${new Date(notAfter).toISOString()}`, fix: renew });
    return;
  }
  const selfSigned = cert.issuer === cert.subject;
  out.push({
    id: 'tls',
    title,
    status: selfSigned ? 'warn' : 'ok',
    detail: `valid until ${new Date(notAfter).toISOString()} (${days} days), for ${host}${selfSigned ? '; self-signed' : ''}`,
    fix: selfSigned ? 'senders accept it for opportunistic STARTTLS, but MTA-STS and DANE-less strict senders will not: prefer a certificate from a public CA' : undefined,
  });
}

/**
 * Records an operator must have for mail to flow; the rest only help, so their absence is a
 * warning. The same split as `mailroom domains show` prints: SPF and DMARC are "recommended"
 * (DKIM alone passes DMARC alignment, RFC 7489 §3.1), the ownership token, DKIM key and MX are
 * required.
 */
const REQUIRED: Record<RecordRole, boolean> = { ownership: true, dkim: true, spf: false, mx: true, dmarc: false, mta_sts: false, mta_sts_host: false, tls_rpt: false };
const ROLE_TITLE: Record<RecordRole, string> = {
  ownership: 'ownership TXT',
  dkim: 'DKIM key',
  spf: 'SPF',
  dmarc: 'DMARC',
  mx: 'MX',
  mta_sts: 'MTA-STS TXT',
  mta_sts_host: 'MTA-STS policy host',
  tls_rpt: 'TLS-RPT',
};

function recordCheck(domain: string, record: DnsRecord, c: RecordCheck): DoctorCheck {
  const base = { id: 'domain', title: `${domain}: ${ROLE_TITLE[c.role]} record`, domain, role: c.role, detail: c.detail };
  const line = zoneLine(record);
  switch (c.state) {
    case 'found':
      return { ...base, status: 'ok' };
    case 'missing':
      return REQUIRED[c.role]
        ? { ...base, status: 'fail', detail: `${c.detail} (required)`, fix: `publish: ${line}` }
        : { ...base, status: 'warn', detail: `${c.detail} (recommended, not required)`, fix: `publish: ${line}` };
    case 'wrong':
      return { ...base, status: 'fail', fix: `replace what is published at ${record.name} (${record.type}) with: ${line}` };
    case 'differs':
      return { ...base, status: 'warn', fix: c.role === 'spf' ? `make sure it authorizes this host, e.g.: ${line}` : `name this appliance's report address in its rua, e.g.: ${line}` };
    default:
      return { ...base, status: 'warn', fix: 'DNS did not answer; run doctor again (check `dns.servers`)' };
  }
}

async function checkDomains(ctx: AppContext, out: DoctorCheck[]): Promise<string[]> {
  const shared = normalizeHost(ctx.config.shared_domain);
  const names: string[] = [];
  if (RESERVED.test(shared)) {
    out.push({
      id: 'domain',
      title: `${shared}: records`,
      domain: shared,
      status: 'skip',
      detail: `the shared domain ${shared} is a reserved name; inboxes on it cannot receive mail from the internet`,
      fix: 'set `shared_domain` to a domain you control (its MX pointing at the hostname) if agents need shared-domain inboxes',
    });
  } else {
    await ensureSharedDkimKey(ctx);
    names.push(shared);
  }
  for (const d of await listAllDomains(ctx)) if (!names.includes(d.domain)) names.push(d.domain);
  for (const name of names) {
    const records = await dnsRecordsFor(ctx, name);
    if (!records) continue;
    let checks: RecordCheck[];
    try {
      checks = await inspectRecords(ctx, records);
    } catch (err) {
      out.push({ id: 'domain', title: `${name}: records`, domain: name, status: 'warn', detail: explain(err), fix: 'run doctor again when DNS answers' });
      continue;
    }
    for (const c of checks) {
      const record = records.plan[c.role];
      if (record) out.push(recordCheck(name, record, c));
    }
  }
  return names;
}

// ---------------------------------------------------------------------------------------------
// The bulk-sender checklist: what Gmail (since 2024, rejecting since November 2025), Yahoo and
// Microsoft (550 5.7.515 since May 2025) require of anyone sending them mail in bulk.

/** Gmail's complaint-rate limit (spam reports over mail delivered): 0.3%; it asks for under 0.1%. */
const COMPLAINT_LIMIT = 0.003;
const COMPLAINT_TARGET = 0.001;
const COMPLAINT_WINDOW_DAYS = 30;

function checkAlignment(names: string[], checks: DoctorCheck[], out: DoctorCheck[]): void {
  for (const name of names) {
    const of = (role: RecordRole) => checks.find((c) => c.id === 'domain' && c.domain === name && c.role === role);
    const title = `${name}: SPF and DKIM aligned with the From domain, DMARC published (bulk-sender rules)`;
    // mailroom signs with d=<From domain> and sends from bounces+…@<From domain>: both
    // identifiers align by construction once the domain's records are in DNS.
    const missing = (['dkim', 'spf', 'dmarc'] as const).filter((role) => {
      const c = of(role);
      return !c || !(c.status === 'ok' || (role === 'dmarc' && c.role === 'dmarc' && /rua does not name/.test(c.detail)));
    });
    if (!missing.length) {
      out.push({ id: 'bulk-alignment', title, domain: name, status: 'ok', detail: `DKIM d=${name} and SPF for bounces@${name} pass and align; DMARC is published` });
      continue;
    }
    out.push({
      id: 'bulk-alignment',
      title,
      domain: name,
      status: 'fail',
      detail: `not in order: ${missing.map((r) => ROLE_TITLE[r]).join(', ')}; Gmail and Yahoo reject bulk mail without them, Microsoft answers 550 5.7.515`,
      fix: missing.map((r) => of(r)?.fix ?? `publish the ${ROLE_TITLE[r]} record (mailroom domains show ${name})`).join('; '),
    });
  }
}

/** Forward-confirmed reverse DNS (RFC 8601 §3 "iprev"): the PTR name resolves back to the address, and is the HELO name. */
async function checkFcrdns(ctx: AppContext, facts: HostFacts, out: DoctorCheck[]): Promise<void> {
  const host = normalizeHost(ctx.config.hostname);
  const title = `forward-confirmed reverse DNS of the sending address matches the HELO name ${host} (bulk-sender rules)`;
  if (ctx.config.outbound.relay) {
    out.push({ id: 'fcrdns', title, status: 'skip', detail: "mail leaves through outbound.relay: its address and name are the relay's" });
    return;
  }
  if (!facts.own.length) {
    out.push({ id: 'fcrdns', title, status: 'skip', detail: 'no public address of this host known (see the hostname check)' });
    return;
  }
  for (const ip of facts.own.slice(0, 2)) {
    try {
      const names = (await reverseLookup(ctx, ip)).map(normalizeHost);
      const confirmed: string[] = [];
      for (const name of names.slice(0, 5)) if ((await addressesOf(ctx, name).catch(() => [] as string[])).includes(ip)) confirmed.push(name);
      if (confirmed.includes(host)) {
        out.push({ id: 'fcrdns', title, status: 'ok', detail: `${ip} → ${host} → ${ip}` });
        continue;
      }
      const detail = !names.length
        ? `${ip} has no PTR record`
        : !confirmed.length
          ? `PTR of ${ip} is ${names.join(', ')}, which does not resolve back to ${ip}`
          : `PTR of ${ip} is ${confirmed.join(', ')} (confirmed), but the HELO name is ${host}`;
      out.push({
        id: 'fcrdns',
        title,
        status: 'fail',
        detail,
        fix: `set the reverse DNS of ${ip} to ${host} (VPS provider's panel) and publish ${host}. 3600 IN ${isIP(ip) === 6 ? 'AAAA' : 'A'} ${ip}; the HELO name is \`hostname\``,
      });
    } catch (err) {
      out.push({ id: 'fcrdns', title, status: 'warn', detail: `PTR of ${ip}: ${explain(err)}`, fix: 'run doctor again when DNS answers' });
    }
  }
}

function checkBulkTls(checks: DoctorCheck[], out: DoctorCheck[]): void {
  const tls = checks.find((c) => c.id === 'tls');
  const title = 'TLS for mail in and out (bulk-sender rules)';
  const outbound = 'outbound delivery uses STARTTLS whenever the receiving MX offers it';
  if (!tls || tls.status === 'ok') out.push({ id: 'bulk-tls', title, status: 'ok', detail: `${outbound}; inbound: ${tls?.detail ?? 'checked above'}` });
  else out.push({ id: 'bulk-tls', title, status: tls.status, detail: `${outbound}; inbound: ${tls.detail}`, fix: tls.fix });
}

async function checkComplaintRate(ctx: AppContext, out: DoctorCheck[]): Promise<void> {
  const since = new Date(ctx.clock.now().getTime() - COMPLAINT_WINDOW_DAYS * 86_400_000).toISOString();
  const { sent, complained } = await countOutcomesSince(ctx.db, since);
  const title = `complaint rate (ARF reports) over the last ${COMPLAINT_WINDOW_DAYS} days below Gmail's ${COMPLAINT_LIMIT * 100}% (bulk-sender rules)`;
  if (!sent) {
    out.push({ id: 'complaint-rate', title, status: 'skip', detail: `no mail sent in the last ${COMPLAINT_WINDOW_DAYS} days` });
    return;
  }
  const rate = complained / sent;
  const detail = `${complained} complaint(s) over ${sent} message(s) sent: ${(rate * 100).toFixed(2)}%`;
  const fix =
    'send only to people who asked for the mail; give bulk mail a one-click unsubscribe (send with listUnsubscribe: true); complainers are suppressed automatically (GET /suppressions); see which sources fail in GET /domains/{id}/dmarc';
  if (rate >= COMPLAINT_LIMIT) out.push({ id: 'complaint-rate', title, status: 'fail', detail: `${detail}: at or above ${COMPLAINT_LIMIT * 100}%, Gmail rejects or spam-folders the mail`, fix });
  else if (rate >= COMPLAINT_TARGET) out.push({ id: 'complaint-rate', title, status: 'warn', detail: `${detail}: above the ${COMPLAINT_TARGET * 100}% Gmail asks senders to stay under`, fix });
  else out.push({ id: 'complaint-rate', title, status: 'ok', detail });
}

export async function runDoctor(ctx: AppContext, options: DoctorOptions = {}): Promise<DoctorReport> {
  const opts = {
    inboundPort: options.inboundPort ?? 25,
    probeDomain: options.probeDomain ?? 'gmail.com',
    timeoutMs: options.timeoutMs ?? 5000,
    expiryWarnDays: options.expiryWarnDays ?? 14,
  };
  const checks: DoctorCheck[] = [];
  const facts = await checkHostname(ctx, options, checks);
  await checkReverseDns(ctx, facts, checks);
  // The two port probes are independent network waits; run them side by side.
  const inbound: DoctorCheck[] = [];
  const outbound: DoctorCheck[] = [];
  await Promise.all([checkInbound(ctx, facts, opts, inbound), checkOutbound(ctx, opts, outbound)]);
  checks.push(...inbound, ...outbound);
  checkTls(ctx, opts.expiryWarnDays, checks);
  const names = await checkDomains(ctx, checks);
  // The bulk-sender checklist, from the checks above and the sending history.
  checkAlignment(names, checks, checks);
  await checkFcrdns(ctx, facts, checks);
  checkBulkTls(checks, checks);
  await checkComplaintRate(ctx, checks);
  const summary: Record<CheckStatus, number> = { ok: 0, warn: 0, fail: 0, skip: 0 };
  for (const c of checks) summary[c.status]++;
  return { hostname: normalizeHost(ctx.config.hostname), checks, summary };
}

const MARK: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skip: 'skip' };

/** The human-readable report: one line per check, the fix indented under each problem. */
export function renderDoctorReport(report: DoctorReport): string {
  const lines: string[] = [`mailroom doctor for ${report.hostname}`, ''];
  for (const c of report.checks) {
    lines.push(`[${MARK[c.status]}] ${c.title}: ${c.detail}`);
    if (c.fix && c.status !== 'ok') lines.push(`       fix: ${c.fix}`);
  }
  const s = report.summary;
  lines.push('', `${s.ok} ok, ${s.warn} warning(s), ${s.fail} failure(s), ${s.skip} skipped`);
  return lines.join('\n') + '\n';
}
