import { createHmac, timingSafeEqual } from 'node:crypto';
import { AppError } from '../errors/app-error';

export type LinkMethod = 'GET' | 'PUT';

const EXPIRES = /^\d{1,12}$/;
const SIGNATURE = /^[0-9a-f]{64}$/;

/** Hex HMAC-SHA256 of `"<method>\n<bucket>\n<key>\n<expires>"`: what a local-store link carries. */
export function linkSignature(signingKey: Buffer, method: LinkMethod, bucket: string, key: string, expires: number): string {
  return createHmac('sha256', signingKey).update(`${method}\n${bucket}\n${key}\n${expires}`).digest('hex');
}

/**
 * Throws `permission_denied` unless `signature` signs exactly this method, bucket, key and
 * expiry and the expiry is not past. The signature is checked first and in constant time, so
 * a forged link learns nothing, not even whether it would have expired.
 */
export function assertLinkValid(
  signingKey: Buffer, nowSeconds: number,
  link: { method: string; bucket: string; key: string; expires: string | number; signature: string },
): void {
  const expires = typeof link.expires === 'number' ? link.expires : EXPIRES.test(link.expires) ? Number(link.expires) : NaN;
  const method = link.method === 'GET' || link.method === 'PUT' ? link.method : null;
  if (!method || !Number.isSafeInteger(expires) || !SIGNATURE.test(link.signature)) throw invalid();
  const expected = Buffer.from(linkSignature(signingKey, method, link.bucket, link.key, expires), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(link.signature, 'hex'))) throw invalid();
  if (nowSeconds > expires) {
    throw new AppError('permission_denied', `this link expired at ${new Date(expires * 1000).toISOString()}; ask for a new one`);
  }
}

function invalid(): AppError {
  return new AppError('permission_denied', 'this link is not valid: its signature does not match the method, bucket, key and expiry');
}
