import { createHmac, timingSafeEqual } from 'node:crypto';
import { AppError } from '../errors/app-error';

/** What an upload link lets its holder do: store one file of at most `bytes` bytes, as `fileId`, in a deployment's Files API. */
export interface UploadLinkGrant {
  readonly fileId: string;
  readonly workspaceId: string;
  readonly deploymentId: string;
  readonly filename: string;
  /** The declared size: the body may not be longer. */
  readonly bytes: number;
  /** Unix seconds. */
  readonly expires: number;
}

/** The link's query parameters, besides the file id in its path. */
const PARAMS = ['workspace', 'deployment', 'filename', 'bytes', 'expires', 'signature'] as const;
const SIGNATURE = /^[0-9a-f]{64}$/;
const WHOLE = /^\d{1,15}$/;

/**
 * Hex HMAC-SHA256 of the grant, with the key of the local store's links (STORAGE_SIGNING_KEY).
 * The signed text is a JSON array led by `upload`: unambiguous whatever a file name holds, and
 * never equal to a store link's text (`<method>\n<bucket>…`), so neither signature opens the other.
 */
export function uploadSignature(signingKey: Buffer, grant: UploadLinkGrant): string {
  const text = JSON.stringify(['upload', grant.fileId, grant.workspaceId, grant.deploymentId, grant.filename, grant.bytes, grant.expires]);
  return createHmac('sha256', signingKey).update(text).digest('hex');
}

/** `<base>/uploads/<fileId>?workspace=…&deployment=…&filename=…&bytes=…&expires=…&signature=…` */
export function uploadLinkPath(signingKey: Buffer, grant: UploadLinkGrant): string {
  const query = new URLSearchParams({
    workspace: grant.workspaceId, deployment: grant.deploymentId, filename: grant.filename,
    bytes: String(grant.bytes), expires: String(grant.expires), signature: uploadSignature(signingKey, grant),
  });
  return `/uploads/${encodeURIComponent(grant.fileId)}?${query}`;
}

/**
 * The grant a link carries, or `permission_denied` (403) when it was not signed with our key
 * exactly as it is (a tampered byte anywhere), or has expired. The signature is checked first
 * and in constant time: a forged link learns nothing, not even whether it would have expired.
 */
export function verifyUploadLink(signingKey: Buffer, nowSeconds: number, fileId: string, query: (name: (typeof PARAMS)[number]) => string): UploadLinkGrant {
  const bytes = query('bytes');
  const expires = query('expires');
  const signature = query('signature');
  if (!WHOLE.test(bytes) || !WHOLE.test(expires) || !SIGNATURE.test(signature)) throw invalid();
  const grant: UploadLinkGrant = {
    fileId, workspaceId: query('workspace'), deploymentId: query('deployment'), filename: query('filename'), bytes: Number(bytes), expires: Number(expires),
  };
  const expected = Buffer.from(uploadSignature(signingKey, grant), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) throw invalid();
  if (nowSeconds > grant.expires) {
    throw new AppError('permission_denied', `this upload link expired at ${new Date(grant.expires * 1000).toISOString()}; ask for a new one (createAdapterUploadLink)`);
  }
  return grant;
}

function invalid(): AppError {
  return new AppError('permission_denied', 'this upload link is not valid: its signature does not match its file, workspace, deployment, name, size and expiry');
}
