// Large inbound messages in bounded memory. Past LARGE_MESSAGE_BYTES, SMTP DATA goes to a
// staged file (src/store/blobs/staging.ts) as it arrives, behind the trace fields the stored source
// starts with; the message is then parsed from that file with mailparser's streaming parser,
// attachment bytes past ATTACHMENT_MEMORY_BYTES going to staged files of their own. The staged
// source becomes the stored raw file by a rename and each staged attachment its
// content-addressed file by a hard link: nothing is held whole, copied or written twice.
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import type { Attachment, ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { Blobs } from '../../store/blobs/blobs.ts';
import { StagedWriter, removeStaged, type StagedFile } from '../../store/blobs/staging.ts';
import type { InboundInput } from './inbound.ts';
import { headerSection } from './authentication.ts';
import { loadMailparser, traceHeaders, unparsedMessage } from './inbound-parse.ts';

/**
 * Messages up to this size are held in memory (and may be spooled, src/domain/inbound/spool.ts); larger
 * ones are staged on disk. The spool's own limit, so both paths meet at the same size. A few
 * hundred KB, so that an SMTP session holds no more whatever the message's size (issue 31; it
 * was 1 MiB): most mail is far smaller, and still takes the in-memory path and the spool.
 */
export const LARGE_MESSAGE_BYTES = 262_144;

/** Attachment bytes of one large message kept in memory while parsing; the rest is staged. */
export const ATTACHMENT_MEMORY_BYTES = LARGE_MESSAGE_BYTES;

/** A message received into a staged file: trace fields, then the message as received. */
export interface StagedMessage extends StagedFile {
  /** Bytes of trace fields before the message (not counted in size or sha256). */
  traceLength: number;
  /** The message's header section, for authentication (its first LARGE_MESSAGE_BYTES when it does not end there). */
  head: Buffer;
  /** Only whitespace in the whole message (refused like an empty one). */
  blank: boolean;
  /** The message id the trace fields name (the first stored copy gets it), and their time. */
  id: string;
  receivedAt: Date;
}

export const isStaged = (raw: InboundInput['raw']): raw is StagedMessage => !Buffer.isBuffer(raw);

const WHITESPACE = new Set([0x09, 0x0a, 0x0d, 0x20]);

/** A large message being received: write() each piece of DATA, then finish() or discard(). */
export interface InboundStage {
  write(chunk: Buffer): Promise<void> | undefined;
  finish(head: Buffer): Promise<StagedMessage>;
  discard(): Promise<void>;
}

/** Starts staging a message that arrived over SMTP (its trace fields written first). */
export function stageInbound(ctx: AppContext, envelope: Pick<InboundInput, 'mailFrom' | 'remoteAddress' | 'heloName' | 'secure'>): InboundStage {
  const id = newId('msg');
  const receivedAt = ctx.clock.now();
  const trace = traceHeaders(ctx, envelope, id, receivedAt);
  const writer = StagedWriter.create(ctx.config.data_dir, 'smtp', trace);
  let blank = true;
  return {
    write(chunk) {
      if (blank) blank = chunk.every((b) => WHITESPACE.has(b));
      return writer.write(chunk);
    },
    async finish(head) {
      // Written once and fsynced once: on disk it becomes the stored source by a rename; on
      // PostgreSQL it is streamed into the source's rows, and their commit is what is durable.
      const file = await writer.finish(ctx.blobs instanceof Blobs);
      return { ...file, traceLength: trace.length, head, blank, id, receivedAt };
    },
    discard: () => writer.discard(ctx.log),
  };
}

/**
 * A stored source copied to a staged file, to be received like a large message that arrived
 * over SMTP (a local delivery of a large outbound message): never held whole. Its header
 * section is read from its first LARGE_MESSAGE_BYTES. The caller removes the file once the
 * delivery is stored or refused (removeStaged; a stored one was moved into place already).
 */
export async function stageStored(ctx: AppContext, rawPath: string, mailFrom: string): Promise<StagedMessage> {
  const stage = stageInbound(ctx, { mailFrom });
  const first: Buffer[] = [];
  let firstBytes = 0;
  try {
    for await (const chunk of ctx.blobs.stream(rawPath)) {
      if (firstBytes < LARGE_MESSAGE_BYTES) {
        first.push(chunk as Buffer);
        firstBytes += chunk.length;
      }
      await stage.write(chunk as Buffer);
    }
    return await stage.finish(Buffer.from(headerSection(Buffer.concat(first).subarray(0, LARGE_MESSAGE_BYTES))));
  } catch (err) {
    await stage.discard();
    throw err;
  }
}

/** The message of a staged file, without its trace fields. */
export const readStaged = (path: string, staged: Pick<StagedMessage, 'traceLength'>): Readable => createReadStream(path, { start: staged.traceLength });

/** An attachment of a message parsed from disk: `content` in memory, or empty and `staged`. */
export type LargeAttachment = Attachment & { staged?: StagedFile };

/** Header fields simpleParser copies onto the parsed message, with its names. */
const COPIED = ['subject', 'references', 'date', 'to', 'from', 'cc', 'bcc', 'message-id', 'in-reply-to', 'reply-to'];

/**
 * Parses a staged message as simpleParser would (the same options as parseMessage in
 * inbound.ts), except that attachment bytes past ATTACHMENT_MEMORY_BYTES in all are written to
 * staged files, named in `files` (the caller removes them). A message mailparser fails on is
 * kept as parseMessage keeps it (unparsedMessage); a failure to read the file rejects. Either
 * way the staged files made so far are removed.
 */
export async function parseStaged(
  // Only where to stage: it also runs on an analysis worker (analysis-worker.ts), which has no AppContext.
  ctx: { config: { data_dir: string } },
  staged: Pick<StagedMessage, 'path' | 'traceLength' | 'head'>,
): Promise<{ parsed: ParsedMail; files: string[] }> {
  const { MailParser } = await loadMailparser();
  const source = readStaged(staged.path, staged);
  const parser = new MailParser({ skipTextToHtml: true, skipImageLinks: true, keepCidLinks: true, skipHtmlToText: false });
  const mail = { attachments: [] as LargeAttachment[] } as unknown as ParsedMail & Record<string, unknown>;
  const files: string[] = [];
  let inMemory = 0;

  /** Reads one attachment's decoded bytes: into memory while the allowance lasts, else to a staged file. */
  const collect = async (att: LargeAttachment & { content: Readable | Buffer }) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let writer: StagedWriter | undefined;
    for await (const chunk of att.content as Readable) {
      size += (chunk as Buffer).length;
      if (!writer && inMemory + size <= ATTACHMENT_MEMORY_BYTES) {
        chunks.push(chunk as Buffer);
        continue;
      }
      if (!writer) {
        writer = StagedWriter.create(ctx.config.data_dir, 'attachment');
        files.push(writer.path);
        for (const c of chunks.splice(0)) await writer.write(c);
      }
      await writer.write(chunk as Buffer);
    }
    if (writer) {
      att.staged = await writer.finish();
      att.content = Buffer.alloc(0);
    } else {
      att.content = Buffer.concat(chunks, size);
      inMemory += size;
    }
  };

  try {
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        source.destroy();
        reject(err);
      };
      parser.on('error', (err: Error) => fail(Object.assign(err, { unparsable: true })));
      parser.on('headers', (headers) => {
        mail.headers = headers;
        mail.headerLines = (parser as unknown as { headerLines: ParsedMail['headerLines'] }).headerLines;
      });
      let reading = false;
      const next = (): void => {
        reading = true;
        const data = parser.read();
        if (data === null) {
          reading = false;
          return;
        }
        if (data.type === 'text') {
          for (const key of ['text', 'html', 'textAsHtml'] as const) if (key in data) mail[key] = data[key];
          return next();
        }
        mail.attachments.push(data);
        collect(data).then(() => {
          data.release();
          next();
        }, fail);
      };
      parser.on('readable', () => {
        if (!reading) next();
      });
      parser.on('end', () => {
        for (const key of COPIED) if (mail.headers?.has(key)) mail[key.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())] = mail.headers.get(key);
        settled = true;
        resolve();
      });
      source.once('error', fail).pipe(parser);
    });
  } catch (err) {
    await removeStaged(files);
    if ((err as { unparsable?: boolean }).unparsable) return { parsed: unparsedMessage(staged.head), files: [] };
    throw err;
  }
  return { parsed: mail, files };
}
