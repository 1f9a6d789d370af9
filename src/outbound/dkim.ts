// DKIM signing of outbound mail (RFC 6376, rsa-sha256, relaxed/relaxed) with the sending
// domain's key (a custom domain's, or the shared domain's). mailauth hashes the body as it
// streams by, dkim-signer canonicalises the signed header fields; the RSA signature itself is
// computed in libuv's thread pool, off the event loop. Private keys are parsed once: parsing PEM costs more than the signature itself.
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { domainToASCII } from 'node:url';
import dkimSigner from 'dkim-signer';
import { dkimBody, type BodyHash } from 'mailauth/lib/dkim/body/index.js';
import type { AppContext } from '../context.ts';
import { signingKeyFor } from '../domain/domains/dkim-keys.ts';

/**
 * Header fields signed. Besides the content headers, Date and Message-ID are signed so a
 * replayed copy cannot be given a new identity (RFC 6376 §5.4.1 lists them as candidates).
 * List-Unsubscribe and List-Unsubscribe-Post must be signed for one-click unsubscribe (RFC 8058
 * §4). dkim-signer lists in h= only the fields a message has.
 */
const SIGNED_HEADERS = 'From:Sender:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:Content-Type:Content-Transfer-Encoding:In-Reply-To:References:List-Unsubscribe:List-Unsubscribe-Post';

/** crypto.sign with a callback runs in the thread pool (bench/: 0.46 ms of the loop per RSA-2048 signature). */
const signAsync = promisify(sign);

/** By PEM text: a lookup hashes the string natively, no digest object per signature. */
const parsedKeys = new Map<string, KeyObject>();

function keyObject(pem: string): KeyObject {
  let key = parsedKeys.get(pem);
  if (!key) {
    key = createPrivateKey(pem);
    parsedKeys.set(pem, key);
  }
  return key;
}

/** The most a message's header block may take before its body starts (far above any this server composes). */
const MAX_HEADER_BYTES = 1024 * 1024;
const HEADER_END = Buffer.from('\r\n\r\n');

/**
 * What signing needs of a message, taken as its bytes go by: its header block and the relaxed
 * SHA-256 hash of its body (RFC 6376 §3.4.4, mailauth's streaming canonicalizer). Neither the
 * message nor its body is held: a 25 MB source streamed to a file is hashed in 64 KB pieces.
 * Sources are CRLF throughout (buildMime), so the body starts after the first CRLF CRLF.
 */
export class SignedParts {
  private head: Buffer[] = [];
  private headBytes = 0;
  private body: BodyHash | undefined;
  /** The header block, without the empty line; set once the body has started. */
  headers: string | undefined;

  update(chunk: Buffer): void {
    if (this.body) return this.body.update(chunk);
    this.head.push(chunk);
    this.headBytes += chunk.length;
    const seen = this.head.length === 1 ? chunk : Buffer.concat(this.head, this.headBytes);
    const at = seen.indexOf(HEADER_END);
    if (at < 0) {
      if (this.headBytes > MAX_HEADER_BYTES) throw new Error(`message header block over ${MAX_HEADER_BYTES} bytes`);
      this.head = [seen];
      return;
    }
    this.headers = seen.subarray(0, at).toString('utf8');
    this.head = [];
    this.body = dkimBody('relaxed', 'sha256');
    this.body.update(seen.subarray(at + HEADER_END.length));
  }

  /** The body hash (base64), once every byte went through update. */
  bodyHash(): string {
    // A message of headers only has an empty body.
    if (!this.body) {
      this.headers = Buffer.concat(this.head, this.headBytes).toString('utf8').replace(/\r\n$/, '');
      this.body = dkimBody('relaxed', 'sha256');
    }
    return this.body.digest('base64');
  }
}

/**
 * The DKIM-Signature header field (with its CRLF) of a message for `domainName`, from its
 * parts (SignedParts); undefined when mailroom holds no key for the domain (mail then goes
 * unsigned rather than not at all). The RSA signature is computed in the thread pool.
 */
export async function dkimSignature(ctx: AppContext, domainName: string, parts: SignedParts): Promise<Buffer | undefined> {
  const key = await signingKeyFor(ctx, domainName);
  if (!key) return undefined;
  const bodyHash = parts.bodyHash();
  const { DKIMCanonicalizer: canon } = dkimSigner;
  const signed = canon.relaxedHeaders(parts.headers ?? '', SIGNED_HEADERS);
  // One tag group per line; relaxed header canonicalization unfolds them again.
  const dkim = `DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=${domainToASCII(key.domainName)};\r\n q=dns/txt; s=${key.selector}; bh=${bodyHash};\r\n h=${signed.fieldNames};\r\n b=`;
  // RFC 6376 §3.7: the signed data is the canonical signed headers, then this header with b= empty.
  const line = canon.relaxedHeaderLine(dkim);
  const data = `${signed.headers}${line.key}:${line.value}`;
  const signature = (await signAsync('sha256', Buffer.from(data, 'utf8'), keyObject(key.privateKey))).toString('base64');
  // Folded as dkim-signer folds it: the first line after "b=", then 75 columns per line.
  return Buffer.from(`${dkim}${signature.replace(/(^.{73}|.{75}(?!\r?\n|\r))/g, '$&\r\n ').trim()}\r\n`);
}

/** `raw` with a DKIM-Signature for `domainName` before it (dkimSignature), or `raw` unchanged when there is no key. */
export async function signMessage(ctx: AppContext, raw: Buffer, domainName: string): Promise<Buffer> {
  const parts = new SignedParts();
  parts.update(raw);
  const header = await dkimSignature(ctx, domainName, parts);
  return header ? Buffer.concat([header, raw]) : raw;
}
