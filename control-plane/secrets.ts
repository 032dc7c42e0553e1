import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** SHA-256 hex of a high-entropy secret. A slow KDF buys nothing for 256-bit random keys. */
export function hashSecret(plaintext: string): string {
  return createHash('sha256').update(plaintext).digest('hex');
}

/** `prefix` + 32 random bytes, base64url (43 characters). */
export function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

export function sameHash(left: string, right: string): boolean {
  const a = Buffer.from(left, 'hex');
  const b = Buffer.from(right, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}
