// Baseline: a bare smtp-server receiver that reads each message and discards it (no parsing,
// no disk). The ceiling for anything built on smtp-server; prints "listening <port>".
import { SMTPServer } from 'smtp-server';

const server = new SMTPServer({
  authOptional: true,
  disabledCommands: ['AUTH', 'STARTTLS'],
  logger: false,
  maxClients: 1000,
  size: 26_214_400,
  onData(stream, _session, done) {
    stream.on('data', () => undefined);
    stream.on('end', () => done(null, 'OK discarded'));
  },
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.server.address() as { port: number }).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
