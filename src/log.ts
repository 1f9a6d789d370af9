// Structured logging: one JSON object per line on stdout, per request and per lifecycle event.
export type LogFields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

/**
 * stdout, with the lines of one event-loop turn written together: one write (a syscall: stdout
 * to a file or pipe is synchronous) per turn rather than per request — the per-line write was
 * 6% of a GET's CPU in bench/ profiles. Whatever is pending is written when the process exits.
 */
function batchedStdout(): (line: string) => void {
  let pending: string[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const chunk = pending.join('');
    pending = [];
    process.stdout.write(chunk);
  };
  process.once('exit', flush);
  return (line) => {
    pending.push(line);
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush).unref();
    }
  };
}

/** The time of a line: one Date and ISO string per millisecond, not per line. */
let lastMs = 0;
let lastIso = '';
function isoNow(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastIso = new Date(now).toISOString();
  }
  return lastIso;
}

/**
 * One line: the fixed head written as text and the fields stringified on their own, half the
 * CPU of stringifying a merged copy (every API request logs one line). Fields that would repeat
 * a key of the head take the merging way, where they win, as they always did.
 */
function line(level: string, msg: string, fields: LogFields | undefined): string {
  if (fields && ('time' in fields || 'level' in fields || 'msg' in fields)) {
    return JSON.stringify({ time: isoNow(), level, msg, ...fields }) + '\n';
  }
  const head = `{"time":"${isoNow()}","level":"${level}","msg":${JSON.stringify(msg)}`;
  const rest = fields ? JSON.stringify(fields) : '{}';
  return rest.length > 2 ? `${head},${rest.slice(1)}\n` : `${head}}\n`;
}

export function createLogger(write: (line: string) => void = batchedStdout()): Logger {
  const emit = (level: string, msg: string, fields?: LogFields) => write(line(level, msg, fields));
  return {
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
  };
}

/** A logger that drops everything (CLI commands and tests that do not want the noise). */
export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

export function errorFields(err: unknown): LogFields {
  if (!(err instanceof Error)) return { error: String(err) };
  // drizzle wraps a driver's error in one whose message holds the whole statement and its
  // parameters (a message body, a key hash): the driver's reason is logged, and the statement's
  // start, never the parameters.
  const cause = (err as { cause?: unknown }).cause;
  if (err.message.startsWith('Failed query: ') && cause instanceof Error) {
    return { error: cause.message, query: err.message.slice('Failed query: '.length).split('\nparams:')[0]!.slice(0, 160), stack: cause.stack };
  }
  return { error: err.message, stack: err.stack };
}

/**
 * Ends the process at once with exit code 1, after logging why: for a failure after which
 * nothing can be trusted to be on disk (a failed fsync of the write-ahead log). Nothing is
 * accepted any more; what was answered before stays, and a restart recovers from the files.
 */
export function exitOnFatal(log: Logger, msg: string, err: unknown): never {
  log.error(msg, errorFields(err));
  process.exit(1);
}
