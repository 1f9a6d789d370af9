// Receiving SMTP DATA, for both listeners (inbound.ts on the MX port, submission.ts on 587): the
// bytes are counted as they come, held in memory while the message is small, and past
// LARGE_MESSAGE_BYTES (256 KiB) written to a staged file (src/domain/inbound/inbound-large.ts) as
// they arrive; that file then becomes the stored source (fsynced once and renamed, or streamed
// into its rows on PostgreSQL). A session thus holds at most the message's first 256 KiB, and once
// on disk its header section only, whatever its size. Past smtp.max_message_bytes the rest is
// read and dropped and the answer is 552; a transaction cut short or refused leaves no staged
// file (it is removed before the answer).
import type { SMTPServerDataStream } from 'smtp-server';
import type { AppContext } from '../context.ts';
import { LARGE_MESSAGE_BYTES, stageInbound, type InboundStage, type StagedMessage } from '../domain/inbound/inbound-large.ts';
import type { InboundInput } from '../domain/inbound/inbound.ts';
import { headerSection } from '../domain/inbound/authentication.ts';
import { errorFields } from '../log.ts';
import { countSmtpLimited } from '../metrics.ts';
import { memoryBudgetOf } from './memory-budget.ts';
import { messageTooLarge, replyFor, smtpReply, tooMuchInProgress, type SmtpReplyError } from './replies.ts';

/** What a listener does with the message DATA brought. */
export interface DataTarget {
  /** Session id, for the log. */
  session: string;
  /** The trace fields of a staged message name these (none without a remoteAddress: submission). */
  envelope: Pick<InboundInput, 'mailFrom' | 'remoteAddress' | 'heloName' | 'secure'>;
  /**
   * Takes the whole message (in memory, or staged on disk: its file is the caller's to place,
   * and is removed after if it is still there) and resolves to the text of the 250, or rejects
   * with the reply to give.
   */
  take(raw: Buffer | StagedMessage, size: number): Promise<string>;
  /** Called for every message not taken (too large, refused, failed), before its answer. */
  rejected(): void;
}

type Answer = (err?: Error | null, message?: string) => void;

/** The smtp-server onData handler body: reads `stream` into `target` and answers `callback` once. */
export function receiveData(ctx: AppContext, stream: SMTPServerDataStream, target: DataTarget, callback: Answer): void {
  const maxBytes = ctx.config.smtp.max_message_bytes;
  const memory = memoryBudgetOf(ctx);
  // One answer per DATA, whichever of 'error' and 'end' comes first, and only once a dropped
  // staged file is gone (a client told 552 finds nothing of its message left).
  let answered = false;
  let discarding: Promise<void> | undefined;
  const done = (err: SmtpReplyError | null, message?: string) => {
    if (answered) return;
    answered = true;
    void Promise.resolve(discarding)
      .catch(() => undefined)
      .then(() => callback(err, message));
  };
  const chunks: Buffer[] = [];
  let size = 0;
  /** Bytes counted against smtp.memory_budget. */
  let held = 0;
  let overBudget = false;
  let unstaged = false;
  let stage: InboundStage | undefined;
  /** A staged message's header section (its first LARGE_MESSAGE_BYTES if it has no end there). */
  let head: Buffer | undefined;
  const release = () => {
    memory.release(held);
    held = 0;
  };
  const drop = () => {
    chunks.length = 0;
    head = undefined;
    if (stage) discarding = stage.discard();
    stage = undefined;
  };
  stream.on('data', (chunk: Buffer) => {
    size += chunk.length;
    // Past the limit the rest is read and dropped (the client must finish DATA to hear 552),
    // and so is the rest of a transaction the memory budget cannot hold (452 at the end).
    if (size > maxBytes || overBudget || unstaged) return drop();
    if (!stage) {
      if (!memory.take(held, chunk.length)) {
        overBudget = true;
        drop();
        return release();
      }
      held += chunk.length;
      chunks.push(chunk);
      if (size <= LARGE_MESSAGE_BYTES) return;
      // From here on the bytes go to disk as they come; memory keeps the header section (for
      // authentication; the body is read from the file) and no more.
      stage = stageInbound(ctx, target.envelope);
      chunk = Buffer.concat(chunks.splice(0));
      head = Buffer.from(headerSection(chunk));
      memory.release(held - head.length);
      held = head.length;
    }
    // The client waits while the disk catches up (smtp-server stops reading its socket).
    const wait = stage.write(chunk);
    if (wait) {
      stream.pause();
      wait
        .catch((err: unknown) => {
          // A full or failing disk: the rest is read and dropped, and the sender retries later.
          ctx.log.error('smtp message not staged', { session: target.session, ...errorFields(err) });
          unstaged = true;
          drop();
        })
        .finally(() => stream.resume());
    }
  });
  stream.on('error', (err) => {
    release();
    drop();
    done(replyFor(err));
  });
  stream.on('end', () => {
    if (stream.sizeExceeded || size > maxBytes) {
      release();
      target.rejected();
      return done(messageTooLarge(maxBytes));
    }
    if (overBudget) {
      countSmtpLimited(ctx, 'memory_budget');
      return done(tooMuchInProgress());
    }
    if (unstaged) {
      release();
      target.rejected();
      return done(smtpReply(451, '4.3.0', 'local error in processing, try again later'));
    }
    const staging = stage;
    const raw: Promise<Buffer | StagedMessage> = staging ? staging.finish(head!) : Promise.resolve(Buffer.concat(chunks.splice(0), size));
    raw
      .then((message) => target.take(message, size))
      .finally(() => {
        release();
        // Placed (renamed) when stored; otherwise removed here, before the answer.
        return staging?.discard();
      })
      .then(
        (text) => done(null, text),
        (err: SmtpReplyError) => {
          target.rejected();
          done(err);
        },
      );
  });
}
