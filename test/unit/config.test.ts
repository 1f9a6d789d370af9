import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'smol-toml';
import { configFrom, configKeys, loadConfig, parseDuration, parseListen, renderExampleConfig, ConfigError } from '../../src/config.ts';

const example = readFileSync(new URL('../../config.example.toml', import.meta.url), 'utf8');

test('config.example.toml parses, documents every key, and is what the schema renders', () => {
  const parsed = parse(example) as Record<string, unknown>;
  // Parsing the example gives exactly the defaults.
  assert.deepEqual(configFrom(parsed), configFrom({}));
  for (const { key, field } of configKeys()) {
    const name = key.split('.').pop()!;
    const section = key.includes('.') ? key.slice(0, key.lastIndexOf('.')) : '';
    const node = section ? (parsed[section] as Record<string, unknown>) : parsed;
    assert.ok(node && name in node, `config.example.toml lacks ${key}`);
    assert.ok(example.includes(`# ${field.description}\n${name} =`), `config.example.toml lacks the description of ${key}`);
  }
  assert.equal(example, renderExampleConfig(), 'config.example.toml is stale: run `npm run config:example`');
});

test('the keys PRODUCT.md names exist with their documented defaults', () => {
  const c = configFrom({});
  assert.equal(c.data_dir, './data');
  assert.equal(c.hostname, 'localhost');
  assert.equal(c.shared_domain, 'mailroom.localhost');
  assert.deepEqual(c.http.listen, { host: '127.0.0.1', port: 3000 });
  assert.equal(c.http.public_url, 'http://localhost:3000');
  assert.deepEqual(c.smtp.listen, { host: '127.0.0.1', port: 2525 });
  assert.equal(c.smtp.max_message_bytes, 26214400);
  assert.equal(c.outbound.mode, 'email');
  assert.equal(c.outbound.mx_port, 25);
  assert.equal(c.outbound.relay, '');
  assert.deepEqual(c.outbound.retry_schedule, [60e3, 300e3, 1800e3, 7200e3, 21600e3, 43200e3]);
  assert.deepEqual(c.dns.servers, []);
  assert.equal(c.limits.daily_send_limit, 100);
  assert.equal(c.limits.requests_per_minute, 600);
  assert.equal(c.limits.idempotency_window, 86_400_000);
  assert.equal(c.limits.max_attachment_bytes, 26214400);
  assert.deepEqual(c.webhooks.retry_schedule, [5e3, 30e3, 300e3, 1800e3, 7200e3]);
  assert.equal(c.webhooks.timeout, 10_000);
  assert.equal(c.webhooks.allow_insecure_targets, false);
  assert.equal(c.attachments.url_ttl, 900_000);
});

test('durations and listen addresses', () => {
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('1.5s'), 1500);
  assert.equal(parseDuration('2h'), 7_200_000);
  assert.equal(parseDuration('7d'), 604_800_000);
  assert.equal(parseDuration('5'), undefined);
  assert.equal(parseDuration('5 minutes'), undefined);
  assert.deepEqual(parseListen('0.0.0.0:25'), { host: '0.0.0.0', port: 25 });
  assert.deepEqual(parseListen('[::1]:2525'), { host: '::1', port: 2525 });
  assert.equal(parseListen('localhost'), undefined);
  assert.equal(parseListen('1.2.3.4:70000'), undefined);
});

function expectConfigError(input: Record<string, unknown>, pattern: RegExp) {
  assert.throws(
    () => configFrom(input),
    (err: unknown) => err instanceof ConfigError && pattern.test(err.message),
  );
}

test('bad config stops start-up with a message naming the key', () => {
  expectConfigError({ smtp: { listne: '1.2.3.4:25' } }, /`smtp\.listne`: unknown key/);
  expectConfigError({ nonsense: 1 }, /`nonsense`: unknown key/);
  expectConfigError({ limits: { daily_send_limit: '100' } }, /`limits\.daily_send_limit`: expected an integer/);
  expectConfigError({ limits: { daily_send_limit: -1 } }, /`limits\.daily_send_limit`/);
  expectConfigError({ smtp: { idle_timeout: '5 minutes' } }, /`smtp\.idle_timeout`: expected a duration/);
  expectConfigError({ http: { listen: 'localhost' } }, /`http\.listen`: expected "host:port"/);
  expectConfigError({ webhooks: { retry_schedule: ['5s', 'soon'] } }, /`webhooks\.retry_schedule\[1\]`/);
  expectConfigError({ outbound: { mode: 'live' } }, /`outbound\.mode`: expected one of/);
  expectConfigError({ webhooks: { allow_insecure_targets: 'yes' } }, /`webhooks\.allow_insecure_targets`: expected true or false/);
  expectConfigError({ http: 'x' }, /`http`: expected a table/);
  expectConfigError({ dns: { servers: ['dns.example'] } }, /`dns\.servers`: "dns\.example" is not an IP address or "ip:port"/);
  expectConfigError({ dns: { servers: ['1.1.1.1', '10.0.0.1:99999'] } }, /`dns\.servers`: "10\.0\.0\.1:99999"/);
  expectConfigError({ dns: { servers: [53] } }, /`dns\.servers`: expected an array of strings/);
  assert.deepEqual(configFrom({ dns: { servers: ['192.0.2.53', '127.0.0.1:5353', '2001:db8::53', '[::1]:5353'] } }).dns.servers, ['192.0.2.53', '127.0.0.1:5353', '2001:db8::53', '[::1]:5353']);
});

test('loadConfig reads a TOML file, reports unreadable and invalid files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-config-'));
  const good = join(dir, 'good.toml');
  writeFileSync(good, 'hostname = "mx.example.com"\n[smtp]\nlisten = "0.0.0.0:25"\n');
  const c = loadConfig(good);
  assert.equal(c.hostname, 'mx.example.com');
  assert.deepEqual(c.smtp.listen, { host: '0.0.0.0', port: 25 });
  assert.equal(c.http.public_url, 'http://localhost:3000');
  const bad = join(dir, 'bad.toml');
  writeFileSync(bad, 'hostname = \n');
  assert.throws(() => loadConfig(bad), /not valid TOML/);
  assert.throws(() => loadConfig(join(dir, 'missing.toml')), /cannot read config file/);
});

test('hostname and shared_domain must be DNS host names', () => {
  expectConfigError({ hostname: 'mail example' }, /^config key `hostname`: "mail example" is not a valid DNS host name/);
  expectConfigError({ hostname: '' }, /`hostname`: "" is not a valid DNS host name/);
  expectConfigError({ hostname: '-mx.example.com' }, /`hostname`/);
  expectConfigError({ hostname: 'mx..example.com' }, /`hostname`/);
  expectConfigError({ hostname: 'mx_1.example.com' }, /`hostname`/);
  expectConfigError({ hostname: `${'a'.repeat(64)}.example.com` }, /`hostname`/);
  expectConfigError({ hostname: '192.0.2.1' }, /`hostname`/);
  expectConfigError({ shared_domain: 'agents example' }, /`shared_domain`: "agents example" is not a valid DNS host name/);
  for (const ok of ['localhost', 'mx.example.com', 'MX-1.Example.com', 'mx.example.com.', 'xn--bcher-kva.example']) assert.equal(configFrom({ hostname: ok }).hostname, ok);
});

test('http.public_url must be an absolute http(s) URL; a trailing slash is dropped', () => {
  for (const bad of ['localhost:3000', 'mail.example.com', '/api', 'ftp://mail.example.com', 'https://', 'mailto:x@example.com']) {
    expectConfigError({ http: { public_url: bad } }, /^config key `http\.public_url`: expected an absolute http:\/\/ or https:\/\/ URL/);
  }
  expectConfigError({ http: { public_url: 'https://mail.example.com/?x=1' } }, /`http\.public_url`: must not contain a query/);
  assert.equal(configFrom({ http: { public_url: 'https://mail.example.com/' } }).http.public_url, 'https://mail.example.com');
  assert.equal(configFrom({ http: { public_url: 'http://127.0.0.1:3000/mailroom' } }).http.public_url, 'http://127.0.0.1:3000/mailroom');
});

test('every bad key is reported, one line each, not just the first', () => {
  assert.throws(
    () => configFrom({ hostname: 'mail example', http: { public_url: 'localhost:3000', listen: 'x' }, smtp: 'y', nonsense: 1 }),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.deepEqual(
        err.problems.map((p) => /^config key `([^`]+)`/.exec(p)?.[1]),
        ['nonsense', 'hostname', 'http.listen', 'http.public_url', 'smtp'],
      );
      assert.equal(err.message, err.problems.join('\n'));
      return true;
    },
  );
});
