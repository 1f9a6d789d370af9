// mailroom doctor — what still stands between this host and mail that arrives and is not
// spam: hostname and reverse DNS, port 25 in and out, the STARTTLS certificate, each domain's
// records. Human-readable by default, --json for scripts; exit code 1 when a check fails.
import type { Command } from 'commander';
import { isIP } from 'node:net';
import { CliError, globals, withContext } from '../shared.ts';

const positive = (name: string, v: string | undefined, max: number): number | undefined => {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max) throw new CliError(`${name} must be a whole number from 1 to ${max}, got ${v}`);
  return Number(v);
};

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description("check DNS, reverse DNS, port 25, the TLS certificate and every domain's records; say how to fix each problem")
    .option('--address <ip>', "this host's public IP address (when it is behind NAT and its interfaces do not show it)")
    .option('--smtp-port <n>', 'port the internet reaches the SMTP listener on', '25')
    .option('--probe-domain <domain>', 'a domain whose MX is contacted to test outbound port 25', 'gmail.com')
    .option('--timeout <seconds>', 'time limit of each connection', '5')
    .option('--json', 'print the report as JSON')
    .action(async (opts: { address?: string; smtpPort: string; probeDomain: string; timeout: string }, cmd: Command) => {
      if (opts.address !== undefined && !isIP(opts.address)) throw new CliError(`--address must be an IP address, got ${opts.address}`);
      // Loaded when the command runs, so that other commands (serve) do not evaluate it.
      const { renderDoctorReport, runDoctor } = await import('../../src/domain/domains/doctor.ts');
      const report = await withContext(
        cmd,
        async (ctx) =>
          await runDoctor(ctx, {
            address: opts.address,
            inboundPort: positive('--smtp-port', opts.smtpPort, 65535),
            probeDomain: opts.probeDomain,
            timeoutMs: positive('--timeout', opts.timeout, 60)! * 1000,
          }),
      );
      process.stdout.write(globals(cmd).json ? JSON.stringify(report, null, 2) + '\n' : renderDoctorReport(report));
      if (report.summary.fail > 0) process.exitCode = 1;
    });
}
