// Attachments API over real sockets: multipart upload streamed to disk, limits (413 leaving
// nothing behind), content type checks, filenames that never become paths, GET with a fresh
// presigned URL, and the public download route with tampered, foreign and expired signatures.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { count, eq } from 'drizzle-orm';
import type { Clock } from '../../src/context.ts';
import { attachments, events } from '../../src/store/schema.ts';
import { deliverMail } from '../support/mail.ts';
import { getAttachmentRows } from '../../src/domain/mail/attachments.ts';
import { AppError } from '../../src/domain/errors.ts';
import { until } from '../support/wait.ts';
import { storedBlobs } from '../support/blobs.ts';
import { expectError, readResponse, startTestServer, type ApiResponse, type TestServer } from '../support/server.ts';
import { sqlDb } from '../support/db.ts';

const MAX = 100_000;
let t: TestServer;
let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };

before(async () => {
  t = await startTestServer({ limits: { max_attachment_bytes: MAX }, attachments: { url_ttl: '10m' } }, { clock });
});
after(async () => {
  await t?.close();
});

async function upload(parts: FormData | string, opts: { key?: string; headers?: Record<string, string> } = {}): Promise<ApiResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.key ?? t.key}`, ...opts.headers };
  return readResponse(await fetch(`${t.url}/attachments`, { method: 'POST', headers, body: parts }));
}

function form(content: Buffer | string, filename: string, type = 'application/octet-stream', field = 'file'): FormData {
  const fd = new FormData();
  fd.append(field, new Blob([typeof content === 'string' ? content : new Uint8Array(content)], { type }), filename);
  return fd;
}

/** Stored attachment blobs (files, or rows on PostgreSQL), and temporary files under data_dir. */
async function storedFiles(): Promise<string[]> {
  const walk = (d: string): string[] => (existsSync(d) ? readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)])) : []);
  return [...(await storedBlobs(t.server.ctx, 'attachments')).map((b) => b.key), ...walk(join(t.dataDir, 'attachments')).filter((f) => f.endsWith('.tmp'))];
}

const rowCount = async (): Promise<number> => (await sqlDb(t.server.ctx).select({ n: count() }).from(attachments).where(eq(attachments.accountId, t.accountId)).get())!.n;

describe('upload', () => {
  test('201 with the Attachment; downloads byte-identical with safe headers', async () => {
    const bytes = randomBytes(60_000);
    const res = await upload(form(bytes, 'data.bin', 'application/zip'));
    assert.equal(res.status, 201);
    const a = res.body;
    assert.match(a.id, /^att_/);
    assert.equal(a.filename, 'data.bin');
    assert.equal(a.contentType, 'application/zip');
    assert.equal(a.size, bytes.length);
    assert.ok(Date.parse(a.createdAt));
    const url = new URL(a.url);
    assert.equal(url.origin + url.pathname, `${t.url}/attachments/${a.id}/download`);
    assert.match(url.searchParams.get('expires')!, /^\d+$/);
    assert.match(url.searchParams.get('signature')!, /^[0-9a-f]{64}$/);
    // No API key: the signature is the credential.
    const dl = await fetch(a.url);
    assert.equal(dl.status, 200);
    assert.equal(dl.headers.get('content-type'), 'application/zip');
    assert.equal(dl.headers.get('content-disposition'), `attachment; filename="data.bin"; filename*=UTF-8''data.bin`);
    assert.equal(dl.headers.get('x-content-type-options'), 'nosniff');
    assert.ok(Buffer.from(await dl.arrayBuffer()).equals(bytes));
  });

  test('exactly the limit is accepted', async () => {
    const res = await upload(form(Buffer.alloc(MAX, 1), 'max.bin'));
    assert.equal(res.status, 201);
    assert.equal(res.body.size, MAX);
  });

  test('GET /attachments/:id returns it with a fresh URL; other accounts get 404', async () => {
    const a = (await upload(form('hello', 'hello.txt', 'text/plain'))).body;
    const got = await t.api('GET', `/attachments/${a.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.id, a.id);
    assert.equal(got.body.filename, 'hello.txt');
    assert.equal(got.body.size, 5);
    assert.match(got.body.url, /signature=[0-9a-f]{64}$/);
    const dl = await fetch(got.body.url);
    assert.equal(dl.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(await dl.text(), 'hello');
    const other = await t.newAccount('other');
    expectError(await t.api('GET', `/attachments/${a.id}`, undefined, { key: other.key }), 404, 'ATTACHMENT_NOT_FOUND');
    expectError(await t.api('GET', '/attachments/att_nope'), 404, 'ATTACHMENT_NOT_FOUND');
    expectError(await t.api('GET', `/attachments/${a.id}`, undefined, { key: null }), 401, 'UNAUTHORIZED');
  });

  test('over limits.max_attachment_bytes: 413, and nothing left on disk or in the database', async () => {
    const filesBefore = new Set(await storedFiles());
    const rowsBefore = await rowCount();
    expectError(await upload(form(Buffer.alloc(MAX + 1, 2), 'big.bin')), 413, 'PAYLOAD_TOO_LARGE');
    expectError(await upload(form(Buffer.alloc(MAX * 3, 2), 'bigger.bin')), 413, 'PAYLOAD_TOO_LARGE');
    assert.deepEqual(
      (await storedFiles()).filter((f) => !filesBefore.has(f)),
      [],
    );
    assert.equal(await rowCount(), rowsBefore);
    assert.deepEqual(
      (await storedFiles()).filter((f) => f.endsWith('.tmp')),
      [],
    );
  });

  test('wrong content type is 415; a missing `file` part is 400', async () => {
    expectError(await t.api('POST', '/attachments', { file: 'aGVsbG8=' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    expectError(await upload('just text', { headers: { 'content-type': 'text/plain' } }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    const fields = new FormData();
    fields.append('file', 'not a file, a field');
    const noFile = await upload(fields);
    expectError(noFile, 400, 'VALIDATION_ERROR');
    assert.match(noFile.body.error.message, /`file`/);
    expectError(await upload(form('x', 'x.txt', 'text/plain', 'document')), 400, 'VALIDATION_ERROR');
    expectError(await upload('--nope\r\ngarbage', { headers: { 'content-type': 'multipart/form-data; boundary=zzz' } }), 400, 'VALIDATION_ERROR');
    expectError(await upload('x', { headers: { 'content-type': 'multipart/form-data' } }), 415, 'UNSUPPORTED_MEDIA_TYPE');
  });

  test('a read-only key cannot upload', async () => {
    const { createApiKey } = await import('../../src/domain/accounts/apikeys.ts');
    const ro = await createApiKey(t.server.ctx, t.accountId, { readOnly: true });
    expectError(await upload(form('x', 'x.txt'), { key: ro.key }), 403, 'FORBIDDEN');
  });

  test('the filename never becomes a path; UTF-8 names are encoded per RFC 6266', async () => {
    const evil = (await upload(form('root:x:0:0', '../../../etc/passwd'))).body;
    assert.equal(evil.filename, 'passwd');
    // The bytes are stored under the attachment id, inside data_dir (or as a blob row).
    const inside = (await storedBlobs(t.server.ctx, 'attachments')).filter((b) => b.key.endsWith(evil.id));
    assert.equal(inside.length, 1);
    assert.equal(inside[0].size, 10);
    const win = (await upload(form('x', 'C:\\Windows\\system32\\evil.dll'))).body;
    assert.equal(win.filename, 'evil.dll');
    const dots = (await upload(form('x', '..'))).body;
    assert.equal(dots.filename, 'attachment');

    const utf = (await upload(form('x', 'résumé 2024 ✓.pdf', 'application/pdf'))).body;
    assert.equal(utf.filename, 'résumé 2024 ✓.pdf');
    const dl = await fetch(utf.url);
    assert.equal(dl.headers.get('content-disposition'), `attachment; filename="r_sum_ 2024 _.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%202024%20%E2%9C%93.pdf`);
    // Quotes and backslashes cannot break out of the header's quoted string.
    const raw = `--b2\r\nContent-Disposition: form-data; name="file"; filename="say \\"hi\\".txt"\r\n\r\nx\r\n--b2--\r\n`;
    const quoted = (await upload(raw, { headers: { 'content-type': 'multipart/form-data; boundary=b2' } })).body;
    assert.equal(quoted.filename, 'say "hi".txt');
    const qd = await fetch(quoted.url);
    assert.equal(qd.headers.get('content-disposition'), `attachment; filename="say _hi_.txt"; filename*=UTF-8''say%20%22hi%22.txt`);
  });

  test('active content is never served inline as HTML or script', async () => {
    for (const type of ['text/html', 'image/svg+xml', 'application/xhtml+xml', 'text/javascript']) {
      const a = (await upload(form('<script>alert(1)</script>', 'page.html', type))).body;
      assert.equal(a.contentType, type);
      const dl = await fetch(a.url);
      assert.equal(dl.headers.get('content-type'), 'application/octet-stream', type);
      assert.match(dl.headers.get('content-disposition')!, /^attachment;/);
      assert.equal(dl.headers.get('x-content-type-options'), 'nosniff');
    }
  });

  test('Idempotency-Key replays the same Attachment', async () => {
    const fd = () => form('same bytes', 'same.txt', 'text/plain');
    const first = await upload(fd(), { headers: { 'idempotency-key': 'upload-1' } });
    assert.equal(first.status, 201);
    // FormData boundaries differ per request; the replay needs the identical body.
    const raw = `--b1\r\nContent-Disposition: form-data; name="file"; filename="same.txt"\r\nContent-Type: text/plain\r\n\r\nsame bytes\r\n--b1--\r\n`;
    const a = await upload(raw, { headers: { 'idempotency-key': 'upload-2', 'content-type': 'multipart/form-data; boundary=b1' } });
    const b = await upload(raw, { headers: { 'idempotency-key': 'upload-2', 'content-type': 'multipart/form-data; boundary=b1' } });
    assert.equal(a.status, 201);
    assert.equal(b.status, 201);
    assert.equal(b.headers.get('idempotent-replayed'), 'true');
    assert.equal(b.body.id, a.body.id);
  });
});

describe('signed download', () => {
  let a: any;
  let b: any;
  before(async () => {
    a = (await upload(form('attachment A', 'a.txt', 'text/plain'))).body;
    b = (await upload(form('attachment B', 'b.txt', 'text/plain'))).body;
  });

  const withParams = (url: string, change: Record<string, string | null>) => {
    const u = new URL(url);
    for (const [k, v] of Object.entries(change)) {
      if (v === null) u.searchParams.delete(k);
      else u.searchParams.set(k, v);
    }
    return u.toString();
  };
  const get = async (url: string): Promise<ApiResponse> => readResponse(await fetch(url));

  test('a tampered, missing or malformed signature is 403 INVALID_SIGNATURE', async () => {
    const sig = new URL(a.url).searchParams.get('signature')!;
    const flipped = (sig[0] === 'a' ? 'b' : 'a') + sig.slice(1);
    expectError(await get(withParams(a.url, { signature: flipped })), 403, 'INVALID_SIGNATURE');
    expectError(await get(withParams(a.url, { signature: null })), 403, 'INVALID_SIGNATURE');
    expectError(await get(withParams(a.url, { signature: 'zz' })), 403, 'INVALID_SIGNATURE');
    expectError(await get(withParams(a.url, { expires: null })), 403, 'INVALID_SIGNATURE');
    // Extending the expiry invalidates the signature.
    const later = String(Number(new URL(a.url).searchParams.get('expires')) + 3600);
    expectError(await get(withParams(a.url, { expires: later })), 403, 'INVALID_SIGNATURE');
  });

  test("another attachment's signature does not open this one", async () => {
    const bu = new URL(b.url);
    const forged = `${t.url}/attachments/${a.id}/download?expires=${bu.searchParams.get('expires')}&signature=${bu.searchParams.get('signature')}`;
    expectError(await get(forged), 403, 'INVALID_SIGNATURE');
    // An unknown id with a foreign signature says nothing about existence either.
    expectError(await get(forged.replace(a.id, 'att_nope')), 403, 'INVALID_SIGNATURE');
    assert.equal((await get(b.url)).text, 'attachment B');
  });

  test('an expired URL is 410 URL_EXPIRED; a fresh one from GET works again', async () => {
    assert.equal((await get(a.url)).status, 200);
    offsetMs = 11 * 60_000; // past attachments.url_ttl (10m)
    try {
      expectError(await get(a.url), 410, 'URL_EXPIRED');
      const fresh = (await t.api('GET', `/attachments/${a.id}`)).body.url;
      assert.notEqual(fresh, a.url);
      assert.equal((await get(fresh)).text, 'attachment A');
    } finally {
      offsetMs = 0;
    }
  });
});

test('getAttachmentRows (used by sending) names an unknown id in a 400', async () => {
  const a = (await upload(form('x', 'x.txt'))).body;
  const other = await t.newAccount('rows');
  assert.deepEqual(
    (await getAttachmentRows(t.server.ctx, t.accountId, [a.id])).map((r) => r.id),
    [a.id],
  );
  await assert.rejects(
    () => getAttachmentRows(t.server.ctx, other.accountId, [a.id]),
    (err: unknown) => err instanceof AppError && err.code === 'VALIDATION_ERROR' && err.message.includes(a.id),
  );
});

describe('uploads with an Idempotency-Key stream', () => {
  const SIZE = 20 * 1024 * 1024;
  let big: TestServer;
  before(async () => {
    big = await startTestServer({ limits: { max_attachment_bytes: 25 * 1024 * 1024 }, http: { request_timeout: '5m' } });
  });
  after(async () => {
    await big?.close();
  });

  /** A multipart body of `size` bytes of file content, generated as it is sent (the client holds none of it). */
  function streamedForm(size: number, seed: number): { body: ReadableStream<Uint8Array>; boundary: string } {
    const boundary = `b${seed}`;
    const chunk = Buffer.alloc(64 * 1024, seed);
    let left = size;
    let stage = 0;
    return {
      boundary,
      body: new ReadableStream({
        pull(c) {
          if (stage === 0) c.enqueue(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big${seed}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`));
          else if (left > 0) {
            const n = Math.min(left, chunk.length);
            c.enqueue(chunk.subarray(0, n));
            left -= n;
          } else {
            c.enqueue(Buffer.from(`\r\n--${boundary}--\r\n`));
            c.close();
          }
          stage = 1;
        },
      }),
    };
  }

  test('six concurrent 20 MB uploads with an Idempotency-Key are hashed while they stream, never held in memory', async () => {
    // What is held, not garbage waiting for a collection (V8 collects external memory in steps
    // of tens of MB, and the PostgreSQL driver copies every chunk it sends): a sample at the
    // bound is taken again after full collections (up to three: a collection's ArrayBuffers are
    // freed by a background sweep, finished at the next one). Held memory is never more than a
    // sample, so this fails when collecting before every sample would; that cost a minute of
    // CPU per run, a collection every 20 ms.
    v8.setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    gc();
    const baseline = process.memoryUsage().arrayBuffers;
    const bound = 48 * 1024 * 1024;
    let peak = baseline;
    const sampler = setInterval(() => {
      let held = process.memoryUsage().arrayBuffers;
      for (let i = 0; i < 3 && held - baseline >= bound; i++) {
        gc();
        held = process.memoryUsage().arrayBuffers;
      }
      peak = Math.max(peak, held);
    }, 20);
    try {
      const results = await Promise.all(
        [1, 2, 3, 4, 5, 6].map(async (seed) => {
          const { body, boundary } = streamedForm(SIZE, seed);
          const res = await fetch(`${big.url}/attachments`, {
            method: 'POST',
            headers: { authorization: `Bearer ${big.key}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'idempotency-key': `big-${seed}` },
            body,
            duplex: 'half',
          } as RequestInit);
          return readResponse(res);
        }),
      );
      for (const r of results) {
        assert.equal(r.status, 201, r.text);
        assert.equal(r.body.size, SIZE);
      }
    } finally {
      clearInterval(sampler);
    }
    // Buffered, the six bodies alone were 120 MB (more with the copies concatenation makes).
    assert.ok(peak - baseline < bound, `buffers grew by ${((peak - baseline) / 1024 / 1024).toFixed(0)} MB during the uploads`);
    // Removed once each answer is written.
    await until('spooled bodies removed', () => (readdirSync(join(big.dataDir, 'tmp')).length === 0 ? true : undefined), 5000);
    // And the replay still answers with the same attachment.
    const { body, boundary } = streamedForm(SIZE, 1);
    const again = await readResponse(
      await fetch(`${big.url}/attachments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${big.key}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'idempotency-key': 'big-1' },
        body,
        duplex: 'half',
      } as RequestInit),
    );
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
  });
});

describe('attachments on a message', () => {
  test('every message view carries a fresh download URL per attachment (get and list); the stored event payload carries none', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'with-urls' })).body;
    const bytes = randomBytes(2000);
    const id = await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'has a file', text: 'see file', attachments: [{ filename: 'f.bin', content: bytes }] });
    const got = (await t.api('GET', `/messages/${id}`)).body;
    const listed = (await t.api('GET', `/inboxes/${inbox.id}/messages`)).body.data[0];
    for (const view of [got, listed]) {
      const a = view.attachments[0];
      assert.match(a.url, /\/attachments\/att_[0-9a-z]+\/download\?expires=\d+&signature=[0-9a-f]{64}$/);
      const dl = await fetch(a.url);
      assert.equal(dl.status, 200);
      assert.deepEqual(Buffer.from(await dl.arrayBuffer()), bytes);
    }
    const event = (await sqlDb(t.server.ctx).select().from(events).where(eq(events.messageId, id)).get())!;
    assert.equal(JSON.parse(event.data).attachments[0].url, undefined);
  });
});
