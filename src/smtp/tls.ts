// STARTTLS certificate and key for the SMTP listener. The files are re-read when their size or
// modification time changes (two stat calls as each connection arrives), so a renewed
// certificate (certbot, acme.sh) takes effect without a restart.
import { readFileSync, statSync } from 'node:fs';
import { errorFields, type Logger } from '../log.ts';

export interface TlsFiles {
  key: Buffer;
  cert: Buffer;
}

export class TlsCertificate {
  private stamp = '';
  current: TlsFiles;
  private readonly certPath: string;
  private readonly keyPath: string;
  private readonly log: Logger;

  constructor(certPath: string, keyPath: string, log: Logger) {
    this.certPath = certPath;
    this.keyPath = keyPath;
    this.log = log;
    this.current = this.read();
    this.stamp = this.fingerprint();
  }

  private fingerprint(): string {
    return [this.certPath, this.keyPath]
      .map((p) => {
        const s = statSync(p);
        return `${s.size}:${s.mtimeMs}:${s.ino}`;
      })
      .join('|');
  }

  private read(): TlsFiles {
    return { cert: readFileSync(this.certPath), key: readFileSync(this.keyPath) };
  }

  /**
   * The new files when they changed since the last load, else undefined. A half-written pair (a
   * key that does not match yet) is reported by the caller's updateSecureContext failing; the
   * previous context then stays in use and the next check retries.
   */
  /**
   * At each new connection: a renewed certificate is given to the listener (smtp-server's
   * updateSecureContext); one it rejects leaves the previous one in use.
   */
  refresh(server: { updateSecureContext(options: TlsFiles): void }): void {
    const renewed = this.reloadIfChanged();
    if (!renewed) return;
    try {
      server.updateSecureContext({ key: renewed.key, cert: renewed.cert });
    } catch (err) {
      this.log.warn('smtp tls certificate rejected; keeping the previous one', errorFields(err));
    }
  }

  reloadIfChanged(): TlsFiles | undefined {
    try {
      const stamp = this.fingerprint();
      if (stamp === this.stamp) return undefined;
      const files = this.read();
      this.stamp = stamp;
      this.current = files;
      this.log.info('smtp tls certificate reloaded', { cert: this.certPath });
      return files;
    } catch (err) {
      this.log.warn('smtp tls certificate could not be re-read; keeping the previous one', { error: (err as Error).message });
      return undefined;
    }
  }
}
