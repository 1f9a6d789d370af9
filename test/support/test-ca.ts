// A throwaway certificate authority for TLS tests (openssl): the sender trusts it through
// `outbound.tls_ca_file`, so servers on loopback can present certificates for any test name.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCa {
  /** PEM file of the CA certificate (for `outbound.tls_ca_file`). */
  caFile: string;
  caPem: string;
  /** A key and certificate for `names` signed by the CA (`expired`: valid only in the past). */
  issue(names: string[], opts?: { expired?: boolean }): { key: string; cert: string };
  close(): void;
}

export function startTestCa(): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-ca-'));
  const caKey = join(dir, 'ca.key');
  const caFile = join(dir, 'ca.pem');
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', caKey, '-out', caFile, '-days', '2', '-subj', '/CN=mailroom test CA');
  let n = 0;
  return {
    caFile,
    caPem: readFileSync(caFile, 'utf8'),
    issue(names, opts = {}) {
      const base = join(dir, `leaf${++n}`);
      openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${names[0]}`);
      writeFileSync(`${base}.ext`, `subjectAltName=${names.map((x) => `DNS:${x}`).join(',')}\n`);
      // An expired certificate: valid for a day that ended a year ago.
      const validity = opts.expired ? ['-not_before', '20200101000000Z', '-not_after', '20200102000000Z'] : ['-days', '2'];
      openssl('x509', '-req', '-in', `${base}.csr`, '-CA', caFile, '-CAkey', caKey, '-CAcreateserial', '-out', `${base}.pem`, '-extfile', `${base}.ext`, ...validity);
      return { key: readFileSync(`${base}.key`, 'utf8'), cert: readFileSync(`${base}.pem`, 'utf8') };
    },
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}
