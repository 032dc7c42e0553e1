/**
 * The webhook signature of docs/api-contract.md#webhooks: `X-Service-Signature: t=<unix seconds>,v1=<hex>`, where v1 is
 * the lowercase hex HMAC-SHA256, keyed with the workspace's signing secret, of `"<t>." + raw
 * body`. During a secret rotation the header carries one v1 per valid secret (newest first).
 * This file has no dependencies beyond node:crypto, so receivers can copy it as it is.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Service-Signature';
export const EVENT_HEADER = 'X-Service-Event';

/** The header value for `rawBody` signed at `timestampSeconds` with each of `secrets`. */
export function signWebhookPayload(secrets: readonly string[], rawBody: string | Buffer, timestampSeconds: number): string {
  const signatures = secrets.map((secret) => `v1=${hmacHex(secret, timestampSeconds, rawBody)}`);
  return [`t=${timestampSeconds}`, ...signatures].join(',');
}

/**
 * True when `header` carries a v1 signature of `rawBody` made with `secret`, and its timestamp
 * is within `toleranceSeconds` of now (a replayed old delivery is refused). Verify the raw
 * bytes as received, before any JSON parsing. Comparisons are constant-time.
 */
export function verifyWebhookSignature(
  secret: string,
  header: string | undefined | null,
  rawBody: string | Buffer,
  toleranceSeconds = 300,
  nowSeconds = Math.floor(Date.now() / 1000),
): boolean {
  if (!header || header.length > 4096) return false;
  let timestamp = NaN;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const [name, value] = part.trim().split('=', 2);
    if (name === 't' && /^\d{1,12}$/.test(value ?? '')) timestamp = Number(value);
    else if (name === 'v1' && value) candidates.push(value);
  }
  if (!Number.isFinite(timestamp) || Math.abs(nowSeconds - timestamp) > toleranceSeconds) return false;
  const expected = Buffer.from(hmacHex(secret, timestamp, rawBody), 'utf8');
  let matched = false;
  for (const candidate of candidates) {
    const given = Buffer.from(candidate, 'utf8');
    // No early exit: every candidate is compared, in constant time for equal lengths.
    if (given.length === expected.length && timingSafeEqual(given, expected)) matched = true;
  }
  return matched;
}

function hmacHex(secret: string, timestampSeconds: number, rawBody: string | Buffer): string {
  return createHmac('sha256', secret).update(`${timestampSeconds}.`).update(rawBody).digest('hex');
}
