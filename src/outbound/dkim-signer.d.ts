// Types for dkim-signer (the package ships none): the functions the sender uses.
declare module 'dkim-signer' {
  import type { KeyObject } from 'node:crypto';
  export interface DkimSignOptions {
    domainName: string;
    keySelector: string;
    privateKey: string | KeyObject;
    /** Colon-separated header names to sign. */
    headerFieldNames?: string;
  }
  /** Returns the DKIM-Signature header field (without the trailing CRLF) for `email`. */
  export function DKIMSign(email: string, options: DkimSignOptions): string;
  /** The DKIM-Signature header with its body hash and an empty `b=` (to be followed by the signature). */
  export function generateDKIMHeader(domainName: string, keySelector: string, headerFieldNames: string, headers: string, body: string): string;
  export const DKIMCanonicalizer: {
    /** RFC 6376 §3.4.2 relaxed canonical form of the listed fields, and the names actually present. */
    relaxedHeaders(headers: string, fieldNames: string): { headers: string; fieldNames: string };
    relaxedHeaderLine(line: string): { key: string; value: string };
  };
  const dkimSigner: { DKIMSign: typeof DKIMSign; generateDKIMHeader: typeof generateDKIMHeader; DKIMCanonicalizer: typeof DKIMCanonicalizer };
  export default dkimSigner;
}
