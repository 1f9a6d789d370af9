// A DNSSEC-signed zone behind a real validating resolver: the zone is signed with Debian's
// ldnsutils (ldns-keygen, ldns-signzone) and served by unbound (an auth-zone it validates
// against the zone's DS as trust anchor), on a loopback port. Answers for the zone carry the
// AD flag; publish() re-signs new records and restarts unbound on the same port.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { promises as dnsPromises } from 'node:dns';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './child-server.ts';
import { toolMissing } from './peers.ts';
import { guard } from './wait.ts';

export const dnssecMissing = (): string | false => toolMissing('unbound', ['-V'], 'unbound') || toolMissing('ldns-signzone', ['-v'], 'ldnsutils') || toolMissing('ldns-keygen', ['-v'], 'ldnsutils');

export interface SignedZone {
  /** "127.0.0.1:port" of the validating resolver, for `dns.servers`. */
  server: string;
  /**
   * Replaces the zone's records (lines relative to the origin, e.g. "mx IN A 127.0.0.1"), signed,
   * and restarts the resolver. `tamper` edits the signed zone afterwards (data whose signature
   * then fails: the resolver answers SERVFAIL for it).
   */
  publish(records: string[], tamper?: (signed: string) => string): Promise<void>;
  close(): Promise<void>;
}

export async function startSignedZone(origin: string, records: string[]): Promise<SignedZone> {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-dnssec-'));
  const tool = (cmd: string, args: string[]) => execFileSync(cmd, args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  const ksk = tool('ldns-keygen', ['-a', 'ECDSAP256SHA256', '-k', origin]);
  const zsk = tool('ldns-keygen', ['-a', 'ECDSAP256SHA256', origin]);
  const port = await freePort();
  const zoneFile = join(dir, `${origin}.zone`);
  writeFileSync(
    join(dir, 'unbound.conf'),
    [
      'server:',
      '  interface: 127.0.0.1',
      `  port: ${port}`,
      '  do-ip6: no',
      '  do-daemonize: no',
      '  username: ""',
      '  chroot: ""',
      `  directory: "${dir}"`,
      '  pidfile: ""',
      '  use-syslog: no',
      '  logfile: ""',
      '  access-control: 127.0.0.0/8 allow',
      '  module-config: "validator iterator"',
      // The zone's own DS is the trust anchor: its answers validate (AD), a broken signature is bogus.
      `  trust-anchor-file: "${join(dir, `${ksk}.ds`)}"`,
      // .test is one of unbound's built-in empty zones (RFC 6761): lift it for the auth-zone.
      `  local-zone: "test." nodefault`,
      '  cache-max-ttl: 0',
      'remote-control:',
      '  control-enable: no',
      'auth-zone:',
      `  name: "${origin}"`,
      `  zonefile: "${zoneFile}.signed"`,
      '  for-upstream: yes',
      '  for-downstream: no',
      '  fallback-enabled: no',
    ].join('\n') + '\n',
  );
  let child: ChildProcess | undefined;
  let log = '';
  const stop = async () => {
    if (!child || child.exitCode !== null) return;
    const c = child;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill();
    });
  };
  const publish = async (lines: string[], tamper?: (signed: string) => string) => {
    await stop();
    writeFileSync(
      zoneFile,
      [`$ORIGIN ${origin}.`, '$TTL 60', `@ IN SOA ns.${origin}. hostmaster.${origin}. 1 3600 600 86400 60`, `@ IN NS ns.${origin}.`, 'ns IN A 127.0.0.1', ...lines].join('\n') + '\n',
    );
    tool('ldns-signzone', [zoneFile, zsk, ksk]);
    if (tamper) writeFileSync(`${zoneFile}.signed`, tamper(readFileSync(`${zoneFile}.signed`, 'utf8')));
    child = spawn('unbound', ['-d', '-c', join(dir, 'unbound.conf')], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (c) => (log += c));
    child.stderr!.on('data', (c) => (log += c));
    // Up once it answers for the zone.
    const resolver = new dnsPromises.Resolver({ timeout: 500, tries: 1 });
    resolver.setServers([`127.0.0.1:${port}`]);
    const deadline = Date.now() + guard(20_000);
    for (;;) {
      try {
        await resolver.resolveSoa(origin);
        return;
      } catch {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`unbound did not start:\n${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  await publish(records);
  return {
    server: `127.0.0.1:${port}`,
    publish,
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** SHA-256 (hex) of the SubjectPublicKeyInfo, or of the whole certificate, of a PEM file: TLSA data for matching type 1. */
export function tlsaDigest(certFile: string, selector: 'spki' | 'cert'): string {
  const cert = new X509Certificate(readFileSync(certFile, 'utf8'));
  const der = selector === 'cert' ? cert.raw : cert.publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('hex');
}
