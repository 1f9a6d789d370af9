// Text extraction under load and attack (issue 27): a DOCX zip bomb and a PDF Flate bomb
// (about 1 KB per MB they expand to) answer 422 ATTACHMENT_TEXT_FAILED "expands too much" while
// the server's own peak RSS (VmHWM of a child server) stays under 400 MB; the queue is bounded
// per account (503 TEXT_EXTRACTION_BUSY with Retry-After) and served round robin, so another
// tenant's one-page PDF is answered while the first tenant's slow files still wait; a request
// whose client left (HTTP or MCP) is dropped before it starts, or its process stopped; failures
// caused by load (process killed from outside, waited too long) are not cached, the file's own
// are. Ordering is asserted by observations (the queue's state, answers still pending), never
// by time.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { textExtractionLoad } from '../../src/domain/mail/attachment-text.ts';
import { silentLogger, type LogFields } from '../../src/log.ts';
import { prepareInstance, startChild, stopChild, type ChildServer, type Instance } from '../support/child-server.ts';
import { docxBomb, pdfFlateBomb, pdfHugePageCount, pdfWithText } from '../support/documents.ts';
import { expectError, readResponse, startTestServer, type ApiResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

/** The screening of a text with nothing to flag (GET /attachments/{id}/text carries one). */
const CLEAR = { verdict: 'clear', score: 0, reasons: [] };

/** A deadline for the queue's states, not a speed claim: extraction processes start slowly on a loaded CI pass. */
const LOADED = 60_000;

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

async function upload(url: string, key: string, content: Buffer, filename: string, type: string): Promise<string> {
  const fd = new FormData();
  fd.append('file', new Blob([new Uint8Array(content)], { type }), filename);
  const res = await readResponse(await fetch(`${url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: fd }));
  assert.equal(res.status, 201, res.text);
  return res.body.id;
}

const textOf = async (url: string, key: string, id: string) => readResponse(await fetch(`${url}/attachments/${id}/text`, { headers: { authorization: `Bearer ${key}` } }));

/** Peak resident set of a process (kB → bytes), from the kernel. */
const peakRss = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('text extraction under a memory bound (child server)', () => {
  /** The server's peak RSS stays under this, whatever the files expand to. */
  const SERVER_RSS_BOUND = 400 * 1_048_576;
  let dir: string;
  let inst: Instance;
  let server: ChildServer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mailroom-text-bounds-'));
    // text_max_memory is the default (256 MiB); a long timeout, so only the bound can stop them.
    inst = await prepareInstance(dir, '[attachments]\ntext_timeout = "120s"\n');
    server = await startChild(inst);
  });
  after(async () => {
    if (server) await stopChild(server, 'SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  });

  test('a DOCX zip bomb (1.2 MB → 400 MB) and a PDF Flate bomb (0.7 MB → 700 MB): 422 "expands too much", server RSS bounded', async (tc) => {
    const pid = server.child.pid!;
    const docx = docxBomb(400);
    const pdf = pdfFlateBomb(700);
    assert.ok(docx.length < 1_500_000 && pdf.length < 800_000, `${docx.length} and ${pdf.length} bytes`);
    for (const [label, bytes, name, type] of [
      ['docx', docx, 'bomb.docx', DOCX],
      ['pdf', pdf, 'bomb.pdf', 'application/pdf'],
    ] as const) {
      const id = await upload(inst.httpUrl, inst.key, bytes, name, type);
      const res = await textOf(inst.httpUrl, inst.key, id);
      const rss = peakRss(pid);
      tc.diagnostic(`${label}: ${res.status}, server peak RSS ${Math.round(rss / 1_048_576)} MB`);
      expectError(res, 422, 'ATTACHMENT_TEXT_FAILED');
      assert.match(res.body.error.message, /expands too much.*text_max_memory \(268435456 bytes\)/, label);
      assert.ok(rss < SERVER_RSS_BOUND, `${label}: server peak RSS ${Math.round(rss / 1_048_576)} MB`);
    }
    // An ordinary file under the same bound still gives its text.
    const ok = await textOf(inst.httpUrl, inst.key, await upload(inst.httpUrl, inst.key, pdfWithText(['Still reading']), 'ok.pdf', 'application/pdf'));
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body, { text: 'Still reading', truncated: false, screening: CLEAR });
    assert.ok(peakRss(pid) < SERVER_RSS_BOUND);
  });
});

describe('the extraction queue: bounded, fair per account, abandoned requests dropped', () => {
  let t: TestServer;
  const load = textExtractionLoad;

  before(async () => {
    // One worker, two waiting per account; slow files run until they are stopped.
    const log = { ...silentLogger, error: (msg: string, fields?: LogFields) => void errors.push(`${msg} ${JSON.stringify(fields)}`) };
    t = await startTestServer({ attachments: { text_workers: 1, text_queue_per_account: 2, text_timeout: '120s', text_queue_wait: '120s' } }, { log });
  });
  after(async () => {
    await t?.close();
  });
  /** Error lines of the server's log: a client that leaves is no error. */
  const errors: string[] = [];
  afterEach(() => assert.deepEqual(errors.splice(0), []));

  /** A text request that can be abandoned (its connection closed), and whether it was answered. */
  function ask(id: string, key = t.key): { answer: Promise<ApiResponse>; leave: () => void; answered: () => boolean } {
    const controller = new AbortController();
    let answered = false;
    const answer = fetch(`${t.url}/attachments/${id}/text`, { headers: { authorization: `Bearer ${key}` }, signal: controller.signal })
      .then(readResponse)
      .then((r) => ((answered = true), r));
    answer.catch(() => undefined);
    return { answer, leave: () => controller.abort(), answered: () => answered };
  }
  /** A PDF that takes minutes (a 200,000-page tree walked page by page), distinct per `n`. */
  const slowPdf = (n: number, key = t.key) => upload(t.url, key, pdfHugePageCount(200_000 + n), `slow-${n}.pdf`, 'application/pdf');
  const idle = () => until('the queue to be empty', () => (load().running === 0 && load().waiting === 0 ? true : undefined), LOADED);

  test("tenant A fills its queue: A's next gets 503 TEXT_EXTRACTION_BUSY; tenant B's one-page PDF is answered while A's still wait", async () => {
    const b = await t.newAccount('tenant-b');
    const slow = await Promise.all([1, 2, 3, 4].map((n) => slowPdf(n)));
    const onePage = await upload(t.url, b.key, pdfWithText(['Tenant B, one page']), 'b.pdf', 'application/pdf');
    const base = load();

    const a1 = ask(slow[0]);
    // Counted as running a moment before its process has a pid: both are waited for.
    const a1Pid = await until('A1 running', () => (load().running === 1 ? load().pids[0] : undefined), LOADED);
    // A2 queued before A3 is asked: sent together, either could reach the server first.
    const a2 = ask(slow[1]);
    await until('A2 waiting', () => (load().waiting === 1 ? true : undefined), LOADED);
    const a3 = ask(slow[2]);
    await until('A2 and A3 waiting', () => (load().waiting === 2 ? true : undefined), LOADED);

    const full = await textOf(t.url, t.key, slow[3]);
    expectError(full, 503, 'TEXT_EXTRACTION_BUSY');
    assert.match(full.body.error.message, /text_queue_per_account/);
    assert.equal(full.headers.get('retry-after'), '120');
    assert.equal(load().waiting, 2, 'the refused request did not join the queue');

    const b1 = ask(onePage, b.key);
    await until('B1 waiting behind A2 and A3', () => (load().waiting === 3 ? true : undefined), LOADED);
    // A1's client leaves: its process is stopped, and the free worker goes to B (served least recently), not to A2.
    a1.leave();
    const answered = await b1.answer;
    assert.equal(answered.status, 200, answered.text);
    assert.deepEqual(answered.body, { text: 'Tenant B, one page', truncated: false, screening: CLEAR });
    assert.equal(a2.answered() || a3.answered(), false, "B was answered while A's files were still queued");
    assert.equal(load().stopped, base.stopped + 1);
    await until('A1 process gone', () => (alive(a1Pid) ? undefined : true), LOADED);

    // A3 leaves while waiting: dropped, never started. A2 (running now) leaves: stopped.
    const a2Pid = await until('A2 running, A3 waiting', () => (load().running === 1 && load().waiting === 1 ? load().pids[0] : undefined), LOADED);
    const started = load().started;
    a3.leave();
    await until('A3 dropped', () => (load().dropped === base.dropped + 1 && load().waiting === 0 ? true : undefined), LOADED);
    a2.leave();
    await until('A2 stopped', () => (load().stopped === base.stopped + 2 ? true : undefined), LOADED);
    await idle();
    await until('A2 process gone', () => (alive(a2Pid) ? undefined : true), LOADED);
    assert.equal(load().started, started, 'A3 never started');
    assert.equal(load().started, base.started + 3, 'A1, B1 and A2 started');
  });

  test('an MCP get_attachment whose client leaves stops its extraction', async () => {
    const id = await slowPdf(10);
    const base = load();
    const client = new Client({ name: 'text-bounds', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${t.key}` } } }));
    const call = client.callTool({ name: 'get_attachment', arguments: { attachmentId: id } });
    call.catch(() => undefined);
    const pid = await until('the extraction running', () => (load().running === 1 ? load().pids[0] : undefined), LOADED);
    await client.close();
    await until('the extraction stopped', () => (load().stopped === base.stopped + 1 ? true : undefined), LOADED);
    await idle();
    await until('its process gone', () => (alive(pid) ? undefined : true), LOADED);
  });

  test('failures caused by load are not cached: a process killed from outside, a wait past text_queue_wait', async () => {
    // Killed from outside (as the kernel's OOM killer would): 503, and the next request extracts again.
    const id = await slowPdf(20);
    let base = load();
    const first = ask(id);
    process.kill(await until('the extraction running', () => (load().running === 1 ? load().pids[0] : undefined), LOADED), 'SIGKILL');
    const killed = await first.answer;
    expectError(killed, 503, 'TEXT_EXTRACTION_BUSY');
    assert.match(killed.body.error.message, /killed \(SIGKILL\)/);
    assert.equal(killed.headers.get('retry-after'), '120');
    const again = ask(id);
    await until('the same file extracted again', () => (load().started === base.started + 2 && load().running === 1 ? true : undefined), LOADED);
    again.leave();
    await idle();

    // Waited past text_queue_wait behind a slow file: 503; once the worker is free, the text.
    const onePage = await upload(t.url, t.key, pdfWithText(['Waited its turn']), 'wait.pdf', 'application/pdf');
    const slow = ask(await slowPdf(21));
    await until('the slow file running', () => (load().running === 1 ? true : undefined), LOADED);
    t.config.attachments.text_queue_wait = 200;
    try {
      const waited = await textOf(t.url, t.key, onePage);
      expectError(waited, 503, 'TEXT_EXTRACTION_BUSY');
      assert.match(waited.body.error.message, /text_queue_wait \(200 ms\)/);
    } finally {
      t.config.attachments.text_queue_wait = 120_000;
    }
    slow.leave();
    await idle();
    const res = await textOf(t.url, t.key, onePage);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { text: 'Waited its turn', truncated: false, screening: CLEAR });

    // The file's own failure (it expands too much) is cached: the repeat starts nothing.
    const bomb = await upload(t.url, t.key, docxBomb(400), 'bomb.docx', DOCX);
    base = load();
    const failed = await textOf(t.url, t.key, bomb);
    expectError(failed, 422, 'ATTACHMENT_TEXT_FAILED');
    assert.match(failed.body.error.message, /expands too much/);
    expectError(await textOf(t.url, t.key, bomb), 422, 'ATTACHMENT_TEXT_FAILED');
    assert.equal(load().started, base.started + 1);
  });
});
