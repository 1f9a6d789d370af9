// Every JSON answer an e2e test receives from a test server is checked against the committed
// openapi.json: the operation is found by method and path template, the schema by status, and
// a mismatch throws from fetch itself, so the test that received the answer fails with the
// operation, the status and the schema error. fetch is wrapped once for the whole test process,
// which covers t.api, readResponse and the tests that call fetch directly; answers from other
// origins (webhook receivers, DNS stubs), non-JSON answers (downloads, raw sources, SSE, the
// dashboard) and paths the document does not list are passed through untouched.
// MAILROOM_TEST_OPENAPI=0 turns the check off; MAILROOM_OPENAPI_COVERAGE=<file> appends the
// operations each test process validated to <file>, and `node
// test/support/openapi-check.ts <file>` lists the documented operations no run exercised.
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

const DOC_PATH = join(import.meta.dirname, '..', '..', 'openapi.json');
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

interface Operation {
  key: string; // "GET /inboxes/{id}"
  pattern: RegExp;
  params: number;
  responses: Record<string, any>;
}

let doc: any;
let operations: Operation[] = [];
let ajv: InstanceType<typeof Ajv2020>;
const compiled = new Map<string, ValidateFunction>();
const origins = new Set<string>();
/** Operations whose answers were validated in this process, as "GET /path status". */
export const validated = new Set<string>();

/**
 * The response schemas as the tests hold them: an object lists every field it may carry
 * (the same rule as the `conforms` check in openapi.test.ts), so an undocumented field fails.
 */
function closeObjects(s: any): any {
  if (Array.isArray(s)) return s.map(closeObjects);
  if (!s || typeof s !== 'object') return s;
  const out: any = {};
  for (const [k, v] of Object.entries(s)) out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, ps]) => [p, closeObjects(ps)])) : closeObjects(v);
  if (out.properties && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

function load(): void {
  if (doc) return;
  doc = JSON.parse(readFileSync(DOC_PATH, 'utf8'));
  ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormatsModule as unknown as (a: unknown) => void)(ajv);
  ajv.addSchema({ $id: 'openapi', components: { schemas: closeObjects(doc.components.schemas) } });
  for (const [path, byMethod] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(byMethod)) {
      if (!METHODS.includes(method)) continue;
      const re = path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{\w+\\?\}/g, '[^/]+');
      operations.push({ key: `${method.toUpperCase()} ${path}`, pattern: new RegExp(`^${re}$`), params: (path.match(/\{/g) ?? []).length, responses: op.responses });
    }
  }
  // A literal segment wins over a parameter: /webhooks/catalog before /webhooks/{id}.
  operations.sort((a, b) => a.params - b.params);
}

/** Every documented operation, as "METHOD /path". */
export function documentedOperations(): string[] {
  load();
  return operations.map((o) => o.key);
}

/** The documented operation of a request, or undefined for a path the document does not list. */
export function operationOf(method: string, pathname: string): Operation | undefined {
  load();
  return operations.find((o) => o.key.startsWith(`${method.toUpperCase()} `) && o.pattern.test(pathname));
}

/** The schema error of an answer, or undefined when it conforms (or is not JSON, or not documented). */
export function checkAnswer(method: string, pathname: string, status: number, contentType: string, text: string): string | undefined {
  const op = operationOf(method, pathname);
  if (!op) return undefined;
  const where = `${op.key} answered ${status}`;
  const documented = op.responses[String(status)];
  if (!documented) return `${where}: status ${status} is not documented for this operation`;
  if (!/^application\/json\b/.test(contentType)) {
    // 204 and the non-JSON 200s (downloads, raw source, SSE) are documented as such.
    if (!text || !documented.content?.['application/json']) {
      validated.add(`${op.key} ${status}`);
      return undefined;
    }
    return `${where} with Content-Type ${contentType || '(none)'}, but the document says application/json`;
  }
  const schema = documented.content?.['application/json']?.schema;
  if (!schema) return `${where} with a JSON body the document does not describe`;
  const cacheKey = `${op.key} ${status}`;
  let validate = compiled.get(cacheKey);
  if (!validate) {
    const rewritten = JSON.parse(JSON.stringify(closeObjects(schema)).replaceAll('"#/components/schemas/', '"openapi#/components/schemas/'));
    validate = ajv.compile(rewritten);
    compiled.set(cacheKey, validate);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `${where}: the body is not JSON: ${text.slice(0, 200)}`;
  }
  validated.add(`${op.key} ${status}`);
  if (validate(body)) return undefined;
  const errors = (validate.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}${e.params && 'additionalProperty' in e.params ? ` (${e.params.additionalProperty})` : ''}`);
  return `${where} does not match its documented schema: ${errors.join('; ')}; body: ${text.slice(0, 400)}`;
}

const enabled = process.env.MAILROOM_TEST_OPENAPI !== '0';
let installed = false;

/** Starts checking the answers of a test server (its base URL). */
export function checkAnswersOf(baseUrl: string): void {
  if (!enabled) return;
  origins.add(new URL(baseUrl).origin);
  if (installed) return;
  installed = true;
  const original = globalThis.fetch;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await original(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (!origins.has(url.origin)) return res;
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
    const contentType = res.headers.get('content-type') ?? '';
    if (!operationOf(method, url.pathname)) return res;
    // Streams are read by the test as they come: only their status and type are checked.
    const text = contentType.startsWith('application/json') ? await res.clone().text() : '';
    const error = checkAnswer(method, url.pathname, res.status, contentType, text);
    if (error) throw new Error(`OpenAPI conformance: ${error}`);
    return res;
  };
  const coverage = process.env.MAILROOM_OPENAPI_COVERAGE;
  if (coverage) process.on('exit', () => appendFileSync(coverage, [...validated].map((v) => `${v}\n`).join('')));
}

// `node test/support/openapi-check.ts <coverage file>`: the documented operations
// no test answer exercised (every status counts), after a run with MAILROOM_OPENAPI_COVERAGE.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: openapi-check.ts <coverage file>');
  const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean);
  const seen = new Set(lines.map((l) => l.replace(/ \d+$/, '')));
  const succeeded = new Set(lines.filter((l) => / 2\d\d$/.test(l)).map((l) => l.replace(/ \d+$/, '')));
  const missing = documentedOperations().filter((o) => !seen.has(o));
  console.log(`${operations.length - missing.length} of ${operations.length} documented operations validated at least once; ${succeeded.size} with a success status`);
  for (const o of missing) console.log(`never exercised: ${o}`);
  for (const o of documentedOperations().filter((k) => seen.has(k) && !succeeded.has(k))) console.log(`only error answers validated: ${o}`);
}
