// Real MTAs as test partners: a private Postfix (Debian's postfix package) and a private Exim
// (Debian's exim4 packages, unpacked beside Postfix: the two conflict as installed packages),
// each in its own temporary directory with its own configuration, spool and log, listening on
// a free loopback port. Both route `routeDomains` (mailroom's domains) to mailroom's SMTP
// port, deliver `remote.test` to files, turn `bouncy.test` into a bounce (a DSN back to the
// envelope sender), and greylist one recipient with 450 until told to stop.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { freePort } from './child-server.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { guard } from './wait.ts';

/** A self-signed certificate for STARTTLS (openssl), in `dir`. */
export function selfSignedCert(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${name}`, '-keyout', key, '-out', cert], { stdio: 'ignore' });
  chmodSync(key, 0o644);
  return { cert, key };
}

export interface Mta {
  name: string;
  version: string;
  port: number;
  dir: string;
  /** Messages delivered to `<local>@remote.test`, as stored files' contents. */
  delivered(local: string): string[];
  /** The MTA's log so far. */
  log(): string;
  /** Answer the greylisted recipient 250 from now on. */
  stopGreylisting(): void;
  /** Start handing every queued message to its next hop (Exim's queue runner; Postfix flushes); returns at once. */
  flush(): void;
  stop(): Promise<void>;
}

export interface MtaOptions {
  /** mailroom's SMTP port: mail for `routeDomains` goes there. */
  mailroomPort: number;
  routeDomains: string[];
  /** Recipient answered 450 4.7.1 at RCPT until stopGreylisting(). */
  greylisted?: string;
  /** Queue mail instead of delivering it at once, until flush() (Exim then runs no periodic queue runs). */
  queueOnly?: boolean;
}

const POSTFIX = '/usr/sbin/postfix';
export const postfixMissing = (): string | false => (existsSync(POSTFIX) ? false : 'postfix is not installed (apt-get install postfix; .ci/install-system installs it)');

export async function startPostfix(opts: MtaOptions): Promise<Mta> {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-postfix-'));
  chmodSync(dir, 0o755); // the postfix user reaches its data directory and the mailboxes
  const etc = join(dir, 'etc');
  mkdirSync(etc);
  // postfix-script creates the queue's subdirectories, not the queue directory itself.
  mkdirSync(join(dir, 'spool'), { mode: 0o755 });
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  execFileSync('chown', ['postfix', join(dir, 'data')]);
  mkdirSync(join(dir, 'mail'), { mode: 0o1777 });
  chmodSync(join(dir, 'mail'), 0o1777);
  const port = await freePort();
  const { cert, key } = selfSignedCert(dir, 'postfix.remote.test');
  const nobody = spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' }).stdout.trim();
  // A greylisting policy service, as postgrey is: asked at every RCPT, so a change of mind
  // reaches sessions already open (mailroom reuses its connection for the retry).
  const policy = await greylistPolicy(opts.greylisted);
  writeFileSync(
    join(etc, 'main.cf'),
    [
      'compatibility_level = 3.6',
      `queue_directory = ${join(dir, 'spool')}`,
      `data_directory = ${join(dir, 'data')}`,
      `maillog_file = ${join(dir, 'maillog')}`,
      `maillog_file_prefixes = ${dir}`,
      'myhostname = postfix.remote.test',
      'mydestination =',
      'inet_interfaces = loopback-only',
      'inet_protocols = ipv4',
      'mynetworks = 127.0.0.0/8',
      'alias_maps =',
      'alias_database =',
      'biff = no',
      // mailroom's domains go to mailroom; bouncy.test always fails (a DSN to the sender).
      `relay_domains = ${[...opts.routeDomains, 'bouncy.test'].join(' ')}`,
      `transport_maps = texthash:${join(etc, 'transport')}`,
      'virtual_mailbox_domains = remote.test',
      `virtual_mailbox_base = ${join(dir, 'mail')}`,
      'virtual_mailbox_maps = inline:{ alice@remote.test=alice/, bob@remote.test=bob/, grey@remote.test=grey/ }',
      `virtual_uid_maps = static:${nobody}`,
      `virtual_gid_maps = static:${nobody}`,
      // The policy service only when a recipient is greylisted: asked at every RCPT, it would tax
      // the bench's Postfix → Maildir baseline (bench/postfix.ts) with a round trip per message.
      `smtpd_recipient_restrictions = ${opts.greylisted ? `check_policy_service inet:127.0.0.1:${policy.port}, ` : ''}permit_mynetworks, reject_unauth_destination`,
      // DEFER_IF_PERMIT answers 450 (RFC 5321 §4.2.5 transient) while the later permit stands.
      // An unknown user in a relay domain is queued and bounced later (a DSN), as a relay does.
      'smtpd_reject_unlisted_recipient = no',
      'defer_code = 450',
      `smtpd_tls_cert_file = ${cert}`,
      `smtpd_tls_key_file = ${key}`,
      'smtpd_tls_security_level = may',
      'smtpd_tls_received_header = yes',
      'smtp_tls_security_level = none',
      'smtpd_banner = $myhostname ESMTP Postfix',
      // Fast retries and reuse of connections to mailroom, as in production but quicker.
      'queue_run_delay = 1s',
      'minimal_backoff_time = 1s',
      'maximal_backoff_time = 2s',
      // A transport the queue manager saw deferred (defer_transports, until flush() lifts it) is
      // skipped for transport_retry_time (default 60 s): a flush racing the reload would leave
      // messages waiting a minute.
      'transport_retry_time = 1s',
      'smtp_connection_cache_on_demand = yes',
      'smtp_connection_cache_destinations = [127.0.0.1]:' + opts.mailroomPort,
      ...(opts.queueOnly ? ['defer_transports = smtp'] : []),
      'smtpd_client_connection_rate_limit = 0',
      'notify_classes =',
      'smtputf8_enable = yes',
    ].join('\n') + '\n',
  );
  writeFileSync(
    join(etc, 'transport'),
    [...opts.routeDomains.map((d) => `${d} smtp:[127.0.0.1]:${opts.mailroomPort}`), 'bouncy.test error:5.1.1 User unknown in relay recipient table'].join('\n') + '\n',
  );
  const master = readFileSync('/usr/share/postfix/master.cf.dist', 'utf8')
    .replace(/^smtp\s+inet\s.*$/m, `127.0.0.1:${port} inet n - n - - smtpd`)
    // No chroot: the spool is a temporary directory without the chroot's copies of /etc files.
    .replace(/^(\S+\s+(?:unix|inet|fifo|unix-dgram|pass)\s+\S+\s+\S+\s+)y(\s)/gm, '$1n$2');
  writeFileSync(join(etc, 'master.cf'), master);
  run(POSTFIX, ['-c', etc, 'start'], dir);
  await waitForPort(port, () => readIf(join(dir, 'maillog')));
  return {
    name: 'Postfix',
    version: execFileSync('/usr/sbin/postconf', ['-d', '-h', 'mail_version'], { encoding: 'utf8' }).trim(),
    port,
    dir,
    delivered: (local) => filesUnder(join(dir, 'mail', local)),
    log: () => readIf(join(dir, 'maillog')),
    stopGreylisting() {
      policy.greylisting = false;
    },
    flush() {
      run('/usr/sbin/postconf', ['-c', etc, '-e', 'defer_transports ='], dir);
      // A stop and a start, not a reload: a reload's new queue manager finds the messages the old
      // one is still deferring "still being delivered" and leaves them for a minute. Stopped,
      // every process has let go of the queue; started, the queue manager takes it whole.
      run(POSTFIX, ['-c', etc, 'stop'], dir);
      for (let i = 0; i < 200 && spawnSync(POSTFIX, ['-c', etc, 'status'], { stdio: 'ignore' }).status === 0; i++) spawnSync('sleep', ['0.05']);
      run(POSTFIX, ['-c', etc, 'start'], dir);
      run(POSTFIX, ['-c', etc, 'flush'], dir);
    },
    async stop() {
      spawnSync(POSTFIX, ['-c', etc, 'stop'], { stdio: 'ignore' });
      policy.server.close();
      if (!process.env.MAILROOM_TEST_KEEP_MTA) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Postfix's policy delegation protocol (attribute lines, a blank line; answer `action=...`):
 * DEFER_IF_PERMIT for `address` while greylisting, DUNNO otherwise.
 */
async function greylistPolicy(address: string | undefined): Promise<{ port: number; server: Server; greylisting: boolean }> {
  const state = { port: 0, server: createServer(), greylisting: Boolean(address) };
  state.server.on('connection', (socket) => {
    let buffered = '';
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const request = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const recipient = /^recipient=(.*)$/m.exec(request)?.[1]?.toLowerCase();
        const greylisted = state.greylisting && recipient === address?.toLowerCase();
        socket.write(greylisted ? 'action=DEFER_IF_PERMIT 4.7.1 greylisted, try again later\n\n' : 'action=DUNNO\n\n');
      }
    });
  });
  await new Promise<void>((resolve) => state.server.listen(0, '127.0.0.1', resolve));
  state.port = (state.server.address() as AddressInfo).port;
  return state;
}

/** Where Exim's Debian packages are unpacked (.ci/run does it; MAILROOM_TEST_EXIM_DIR overrides). */
export const EXIM_ROOT = process.env.MAILROOM_TEST_EXIM_DIR ?? '/opt/mailroom-test-exim';
const EXIM = () => join(EXIM_ROOT, 'usr/sbin/exim4');

/** Fetches and unpacks Exim's packages when they are not there yet; a reason when it cannot. */
export function eximMissing(): string | false {
  if (!existsSync(EXIM())) {
    const dl = join(EXIM_ROOT, 'debs');
    try {
      mkdirSync(dl, { recursive: true });
    } catch (err) {
      return `Exim's packages cannot be unpacked into ${EXIM_ROOT} (${(err as Error).message}); .ci/run does it`;
    }
    const got = spawnSync('sh', ['-c', `cd ${dl} && apt-get download exim4-daemon-light exim4-base exim4-config && for f in *.deb; do dpkg -x "$f" ${EXIM_ROOT}; done`], { encoding: 'utf8' });
    if (got.status !== 0 || !existsSync(EXIM()))
      return `Exim's packages (exim4-daemon-light, exim4-base, exim4-config) could not be fetched and unpacked (${got.stderr.trim().split('\n').pop()}); .ci/run does it`;
  }
  const v = spawnSync(EXIM(), ['-bV', '-C', '/dev/null'], { encoding: 'utf8' });
  // A file that cannot be run at all (v.error: EACCES, ENOEXEC) has no output to quote.
  if (!/Exim version/.test(v.stdout ?? ''))
    return `exim4 does not run here: ${v.error?.message ?? (v.stderr || v.stdout).trim().split('\n')[0]} (.ci/run installs libidn12 and creates the Debian-exim user)`;
  return false;
}

export async function startExim(opts: MtaOptions): Promise<Mta> {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-exim-'));
  chmodSync(dir, 0o755); // Exim writes its log and spool as Debian-exim
  for (const d of ['spool', 'log', 'mail']) {
    mkdirSync(join(dir, d));
    chmodSync(join(dir, d), 0o1777); // mkdir's mode is cut by the umask
  }
  const port = await freePort();
  const { cert, key } = selfSignedCert(dir, 'exim.remote.test');
  const grey = join(dir, 'greylisting');
  if (opts.greylisted) writeFileSync(grey, '');
  const conf = join(dir, 'exim.conf');
  writeFileSync(
    conf,
    `primary_hostname = exim.remote.test
keep_environment =
# Exim re-executes itself for queue runs and deliveries: not from its compiled-in path here.
exim_path = ${EXIM()}
spool_directory = ${join(dir, 'spool')}
log_file_path = ${join(dir, 'log')}/%slog
pid_file_path = ${join(dir, 'exim.pid')}
daemon_smtp_ports = ${port}
local_interfaces = 127.0.0.1
exim_user = Debian-exim
exim_group = Debian-exim
trusted_users = root
domainlist local_domains = remote.test
domainlist relay_to_domains = ${[...opts.routeDomains, 'bouncy.test'].join(' : ')}
hostlist relay_from_hosts = 127.0.0.1
acl_smtp_rcpt = acl_check_rcpt
tls_advertise_hosts = *
tls_certificate = ${cert}
tls_privatekey = ${key}
${opts.queueOnly ? 'queue_only = true' : ''}
smtp_accept_max = 100
smtp_accept_queue_per_connection = 0
host_lookup =
rfc1413_hosts =
smtputf8_advertise_hosts = *

begin acl
acl_check_rcpt:
  defer   local_parts = ${opts.greylisted ? opts.greylisted.split('@')[0] : ':'}
          condition = \${if exists{${grey}}}
          message = 450 4.7.1 greylisted, try again later
  accept  domains = +local_domains : +relay_to_domains
  deny    message = relay not permitted

begin routers
to_mailroom:
  driver = manualroute
  domains = ${opts.routeDomains.join(' : ')}
  transport = to_mailroom
  route_list = * 127.0.0.1
  self = send
bouncy:
  driver = redirect
  domains = bouncy.test
  allow_fail
  data = :fail: User unknown
local_user:
  driver = accept
  domains = +local_domains
  local_parts = alice : bob : grey
  transport = local_file
  cannot_route_message = Unknown user

begin transports
to_mailroom:
  driver = smtp
  port = ${opts.mailroomPort}
# DATA, not BDAT: the last message's "." goes out with QUIT pipelined behind it (mailroom offers
# PIPELINING; Exim uses it unless hosts_avoid_pipelining says otherwise) and Exim half-closes.
  hosts_try_chunking =
  hosts_avoid_tls = *
local_file:
  driver = appendfile
  directory = ${join(dir, 'mail')}/$local_part_data
  maildir_format
  create_directory
  user = nobody
  group = nogroup
  mode = 0644

begin retry
*  *  F,10m,1s

begin rewrite
`,
  );
  // Exim keeps root (needed to deliver as another user) with -C only for a configuration named
  // in its compiled-in TRUSTED_CONFIG_LIST; this Exim is used by the tests alone.
  trustConfig(conf, true);
  // -bdf: the daemon stays in the foreground, so `daemon` is the daemon itself and stop() ends
  // it (with -bd it forks, the spawned parent exits at once and the daemon outlived every run).
  // Queue-only: no periodic queue runs, queued mail waits for flush() as at Postfix (a queue run
  // during the queueing would hand messages over one per connection, each tried once before).
  const daemon = spawn(EXIM(), ['-C', conf, '-bdf', ...(opts.queueOnly ? [] : ['-q1s']), '-oX', String(port)], { stdio: 'ignore', detached: false });
  const log = () => readIf(join(dir, 'log', 'mainlog')) + readIf(join(dir, 'log', 'paniclog'));
  await waitForPort(port, log);
  return {
    name: 'Exim',
    version: /Exim version (\S+)/.exec(spawnSync(EXIM(), ['-bV', '-C', conf], { encoding: 'utf8' }).stdout)?.[1] ?? 'unknown',
    port,
    dir,
    delivered: (local) => filesUnder(join(dir, 'mail', local)),
    log,
    stopGreylisting() {
      rmSync(grey, { force: true });
    },
    flush() {
      // One queue runner, two passes (-qq): messages for one host go over one connection. Not
      // waited for: it delivers to mailroom, which runs in this process.
      spawn(EXIM(), ['-C', conf, '-qqf'], { stdio: 'ignore' }).on('error', () => {});
    },
    async stop() {
      daemon.kill('SIGTERM');
      trustConfig(conf, false);
      // Exim's daemon exits on SIGTERM; a stuck one must not hold the suite.
      const killer = setTimeout(() => daemon.kill('SIGKILL'), 5000);
      await new Promise((r) => (daemon.exitCode !== null ? r(undefined) : daemon.once('exit', r)));
      clearTimeout(killer);
      if (!process.env.MAILROOM_TEST_KEEP_MTA) rmSync(dir, { recursive: true, force: true });
    },
  };
}

const TRUSTED_CONFIGS = '/etc/exim4/trusted_configs';
function trustConfig(conf: string, add: boolean): void {
  mkdirSync('/etc/exim4', { recursive: true });
  const listed = readIf(TRUSTED_CONFIGS)
    .split('\n')
    .filter((l) => l && l !== conf && existsSync(l));
  writeFileSync(TRUSTED_CONFIGS, [...listed, ...(add ? [conf] : [])].join('\n') + '\n', { mode: 0o644 });
}

function run(cmd: string, args: string[], dir: string): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr}${r.stdout}\n${dir}`);
}

function readIf(file: string): string {
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => readFileSync(join(e.parentPath, e.name), 'utf8'));
}

async function waitForPort(port: number, log: () => string): Promise<void> {
  const { connect } = await import('node:net');
  const deadline = Date.now() + guard(15_000);
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`MTA did not listen on ${port}:\n${log().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
