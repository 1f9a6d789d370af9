// npm run docs:config: writes docs/configuration.md from the config schema in src/config.ts
// (every key with its type, default and description). test/unit/config-docs.test.ts fails when
// the committed page differs from what this renders, so the page cannot drift from the code.
//
// The schema's field builders (str, int, duration, oneOf, …) are private to src/config.ts, so the
// type of a field is read from its default and from the error its parser gives for a probe value.
// A field this cannot classify throws: teach it the new kind rather than printing a wrong type.
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BUDGETS, ConfigError, configKeys } from '../src/config.ts';

type Field = ReturnType<typeof configKeys>[number]['field'];

/** The error message the field's parser gives for `value`, or null when it accepts it. */
function probe(field: Field, value: unknown): string | null {
  try {
    field.parse(value, 'k');
    return null;
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
}

/** A Markdown description of the field's type, e.g. "integer ≥ 1" or "one of `"email"`, `"dry-run"`". */
export function typeOf(key: string, field: Field): string {
  const def = field.default;
  if (typeof def === 'boolean') return 'boolean';
  if (typeof def === 'number') {
    if (field.example === String(def)) {
      const min = /expected an integer ≥ (-?\d+)/.exec(probe(field, 'x') ?? '');
      if (min) return `integer ≥ ${min[1]}`;
    } else {
      const err = probe(field, 'x') ?? '';
      if (err.includes('expected a duration')) {
        const min = /must be at least (\S+),/.exec(probe(field, '0ms') ?? '');
        return min ? `duration, at least \`${min[1]}\`` : 'duration';
      }
    }
  }
  if (Array.isArray(def)) {
    const err = probe(field, ['x']) ?? '';
    if (err.includes('expected a duration')) return 'list of durations (at least one)';
    if (err.includes('is not an IP address')) return 'list of resolver addresses (`"ip"` or `"ip:port"`)';
    if (probe(field, [1]) !== null && probe(field, ['x']) === null) return 'list of strings';
  }
  if (def === null || (typeof def === 'object' && 'port' in (def as object))) {
    const err = probe(field, 'x') ?? '';
    if (err.includes('expected "host:port"')) {
      return probe(field, '') === null ? 'listen address (`"host:port"`), or `""` for off' : 'listen address (`"host:port"`)';
    }
  }
  if (typeof def === 'string') {
    const err = probe(field, '\u0000 not a value');
    if (err === null) return 'string';
    if (err.includes('not a valid DNS host name')) return 'DNS host name';
    if (err.includes('a PostgreSQL URL')) return '`""` or a `postgres://` URL';
    if (err.includes('expected an absolute http:// or https:// URL')) return 'absolute `http://` or `https://` URL (no query, fragment or credentials)';
    const values = /expected one of (.*), got/.exec(err);
    if (values)
      return `one of ${values[1]
        .split(', ')
        .map((v) => `\`${v}\``)
        .join(', ')}`;
  }
  throw new Error(`build/config-docs.ts cannot tell the type of config key ${key}: add its kind`);
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

const INTRO = `# Configuration

mailroom reads one TOML file; every key is optional and has a default, so an empty file (or none)
runs the appliance on loopback with its data in \`./data\`. This page lists every key with its type,
default and description. It is generated from the schema in [\`src/config.ts\`](../src/config.ts) by
\`npm run docs:config\`, and \`test/unit/config-docs.test.ts\` fails when it is stale: edit the
schema, not this page. [\`config.example.toml\`](../config.example.toml) is the same list as a file
to copy (\`npm run config:example\`, also checked by a test).

## The file

Every command takes \`--config FILE\` (\`mailroom serve --config /etc/mailroom/mailroom.toml\`,
from a source checkout \`npm start -- --config mailroom.toml\`). Without it, \`./mailroom.toml\` is
read when it exists, else the built-in defaults are used. A file named by \`--config\` must exist.

A key inside a section is written in that section's table:

\`\`\`toml
hostname = "mail.example.com"

[outbound]
mode = "dry-run"        # the key outbound.mode
\`\`\`

An unknown key, a wrong type or an unparsable duration or listen address stops start-up with a
message naming the key (a command exits 2 for a bad config file):

\`\`\`
mailroom: config key \`smtp.idle_timeout\`: expected a duration such as "30s", "5m", "2h", got "5 minutes"
\`\`\`

Durations are written \`"500ms"\`, \`"30s"\`, \`"5m"\`, \`"2h"\`, \`"7d"\` (a bare number is refused as
ambiguous). Sizes are integers in bytes. Listen addresses are \`"host:port"\`, e.g.
\`"127.0.0.1:3000"\`, \`"0.0.0.0:25"\` or \`"[::1]:25"\`.
`;

/** docs/configuration.md as generated from the schema. */
export function renderConfigDocs(): string {
  const sections = new Map<string, Array<{ key: string; field: Field }>>();
  for (const entry of configKeys()) {
    const dot = entry.key.lastIndexOf('.');
    const section = dot === -1 ? '' : entry.key.slice(0, dot);
    if (!sections.has(section)) sections.set(section, []);
    sections.get(section)!.push(entry);
  }
  const out = [INTRO];
  for (const [section, entries] of sections) {
    out.push(section === '' ? '## Top-level keys\n' : `## \`[${section}]\`\n`);
    out.push('| key | type | default | description |', '|---|---|---|---|');
    for (const { key, field } of entries) {
      out.push(`| \`${key}\` | ${cell(typeOf(key, field))} | \`${cell(field.example)}\` | ${cell(field.description)} |`);
    }
    out.push('');
  }
  return out.join('\n');
}

/** Bounds that are not config keys: fixed by PRODUCT.md or by a protocol. */
const FIXED_BUDGETS: Array<{ what: string; value: string; past: string }> = [
  { what: 'Failed submission logins for one username from one address (IPv6: one /64)', value: '5, then 15 minutes', past: '`454 4.7.0` to AUTH as that username from there' },
  { what: 'Messages in one `GET /threads/{id}` / MCP `get_thread`', value: '`limit` ≤ 100', past: 'the next page with `offset`; `limit` > 100 is `400 VALIDATION_ERROR`' },
  { what: 'A revoked key: its SSE streams, long-polls, `wait_for_message` calls and SMTP submission sessions', value: '5 s', past: 'ended' },
  { what: 'Long-poll `wait` / `wait_for_message` timeout', value: '60 s', past: '`400 VALIDATION_ERROR`' },
  { what: "An attachment's extracted text screened when it is handed out (`GET /attachments/{id}/text`, MCP `get_attachment`)", value: '64 KiB, once per file', past: 'the rest is not screened' },
];

const BUDGETS_START = '<!-- budgets: generated from src/config.ts by `npm run docs:config`; edit BUDGETS there -->';
const BUDGETS_END = '<!-- end of budgets -->';

/** The budgets table of docs/security.md: every BUDGETS key with its default, then the fixed bounds. */
export function renderBudgetsTable(): string {
  const fields = new Map(configKeys().map((e) => [e.key, e.field]));
  const rows = Object.entries(BUDGETS).map(([key, b]) => {
    const field = fields.get(key);
    if (!field) throw new Error(`BUDGETS names ${key}, which is no config key`);
    return `| ${cell(b.what)} | \`${key}\` | \`${cell(field.example)}\` | ${cell(b.past)} |`;
  });
  const fixed = FIXED_BUDGETS.map((b) => `| ${cell(b.what)} | fixed | ${cell(b.value)} | ${cell(b.past)} |`);
  return [BUDGETS_START, '| Budget | Key | Default | Past it |', '|---|---|---|---|', ...rows, ...fixed, BUDGETS_END].join('\n');
}

/** docs/security.md with its budgets table rendered anew (the text between the markers). */
export function withBudgetsTable(page: string): string {
  const start = page.indexOf(BUDGETS_START);
  const end = page.indexOf(BUDGETS_END);
  if (start === -1 || end === -1) throw new Error('docs/security.md has no budgets markers');
  return page.slice(0, start) + renderBudgetsTable() + page.slice(end + BUDGETS_END.length);
}

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const file = join(import.meta.dirname, '..', 'docs', 'configuration.md');
  writeFileSync(file, renderConfigDocs());
  process.stdout.write(`wrote ${file}\n`);
  const security = join(import.meta.dirname, '..', 'docs', 'security.md');
  writeFileSync(security, withBudgetsTable(readFileSync(security, 'utf8')));
  process.stdout.write(`wrote ${security} (budgets table)\n`);
}
