// Types for dkim-signer (the package ships none): the one function the sender uses.
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
  const dkimSigner: { DKIMSign: typeof DKIMSign };
  export default dkimSigner;
}
