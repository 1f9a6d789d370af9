// DKIM signing of outbound mail (RFC 6376, rsa-sha256, relaxed/relaxed) with the sending
// domain's key (a custom domain's, or the shared domain's). dkim-signer canonicalises and
// builds the header; the RSA signature itself is computed in libuv's thread pool, off the
// event loop. Private keys are parsed once: parsing PEM costs more than the signature itself.
import { createHash, createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import dkimSigner from 'dkim-signer';
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

const parsedKeys = new Map<string, KeyObject>();

function keyObject(pem: string): KeyObject {
  const id = createHash('sha256').update(pem).digest('hex');
  let key = parsedKeys.get(id);
  if (!key) {
    key = createPrivateKey(pem);
    parsedKeys.set(id, key);
  }
  return key;
}

/**
 * Prepends a DKIM-Signature for `domainName` to `raw`. Returns `raw` unchanged when mailroom
 * holds no key for the domain (mail then goes unsigned rather than not at all).
 */
export async function signMessage(ctx: AppContext, raw: Buffer, domainName: string): Promise<Buffer> {
  const key = await signingKeyFor(ctx, domainName);
  if (!key) return raw;
  // What dkim-signer's DKIMSign does, with the signature step made asynchronous.
  const email = raw.toString('utf8');
  const match = /^\r?\n|(?:\r?\n){2}/.exec(email);
  const headers = match ? email.slice(0, match.index) : '';
  const body = match ? email.slice(match.index + match[0].length) : email;
  const { DKIMCanonicalizer: canon, generateDKIMHeader } = dkimSigner;
  const dkim = generateDKIMHeader(key.domainName, key.selector, SIGNED_HEADERS, headers, body);
  // RFC 6376 §3.7: the signed data is the canonical signed headers, then this header with b= empty.
  const line = canon.relaxedHeaderLine(dkim);
  const data = `${canon.relaxedHeaders(headers, SIGNED_HEADERS).headers}${line.key}:${line.value}`;
  const signature = (await signAsync('sha256', Buffer.from(data, 'utf8'), keyObject(key.privateKey))).toString('base64');
  // Folded as dkim-signer folds it: the first line after "b=", then 75 columns per line.
  const header = dkim + signature.replace(/(^.{73}|.{75}(?!\r?\n|\r))/g, '$&\r\n ').trim();
  return Buffer.concat([Buffer.from(header + '\r\n'), raw]);
}
