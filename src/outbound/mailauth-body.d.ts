// Types for mailauth's body canonicalizers (the package types only its top-level API): what
// DKIM signing uses (src/outbound/dkim.ts).
declare module 'mailauth/lib/dkim/body/index.js' {
  export interface BodyHash {
    /** Feeds the next bytes of the body, as they come. */
    update(chunk: Buffer): void;
    digest(encoding: 'base64'): string;
  }
  /** A hash of the canonical body: `canonicalization` "relaxed" or "simple", `algorithm` "sha256" or "sha1". */
  export function dkimBody(canonicalization: string, algorithm?: string): BodyHash;
}
