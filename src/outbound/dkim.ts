// DKIM signing of outbound mail (RFC 6376, rsa-sha256, relaxed/relaxed) with dkim-signer and
// the sending domain's key (a custom domain's, or the shared domain's). Private keys are parsed
// once and cached: parsing PEM costs more than the signature itself at high send rates.
import { createHash, createPrivateKey, type KeyObject } from 'node:crypto';
import dkimSigner from 'dkim-signer';
import type { AppContext } from '../context.ts';
import { signingKeyFor } from '../domain/dkim-keys.ts';

/**
 * Header fields signed. Besides the content headers, Date and Message-ID are signed so a
 * replayed copy cannot be given a new identity (RFC 6376 §5.4.1 lists them as candidates).
 */
const SIGNED_HEADERS = 'From:Sender:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:Content-Type:Content-Transfer-Encoding:In-Reply-To:References';

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
export function signMessage(ctx: AppContext, raw: Buffer, domainName: string): Buffer {
  const key = signingKeyFor(ctx, domainName);
  if (!key) return raw;
  const header = dkimSigner.DKIMSign(raw.toString('utf8'), {
    domainName: key.domainName,
    keySelector: key.selector,
    privateKey: keyObject(key.privateKey),
    headerFieldNames: SIGNED_HEADERS,
  });
  return Buffer.concat([Buffer.from(header + '\r\n'), raw]);
}
