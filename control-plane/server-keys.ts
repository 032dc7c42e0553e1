import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const KEY_BYTES = 32;

/**
 * A 32-byte server key (link signing, secret sealing) from its env value (64 hex characters, or base64 of 32 bytes), or, when unset,
 * from `<dataDir>/<fileName>`, generated on first start. The file keeps a single embedded server's
 * links and sealed secrets valid across restarts; several instances must share the env value.
 */
export function resolveServerKey(value: string | undefined, envName: string, dataDir: string, fileName: string): Buffer {
  if (value) return parseKey(value, envName);
  const file = path.resolve(dataDir, fileName);
  try {
    return parseKey(fs.readFileSync(file, 'utf8').trim(), file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const key = randomBytes(KEY_BYTES);
  try {
    fs.writeFileSync(file, `${key.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  } catch (error) {
    // Another process created it between our read and write: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return parseKey(fs.readFileSync(file, 'utf8').trim(), file);
    throw error;
  }
}

const HEX = /^[0-9a-fA-F]{64}$/;
// 43 characters carry 32 bytes; Node decodes standard and URL-safe alphabets alike.
const BASE64 = /^[A-Za-z0-9+/_-]{43}=?$/;

export function parseKey(value: string, source: string): Buffer {
  if (HEX.test(value)) return Buffer.from(value, 'hex');
  if (BASE64.test(value)) return Buffer.from(value, 'base64');
  throw new Error(`${source} must be 32 bytes as 64 hex characters or base64 (generate one with: openssl rand -hex 32)`);
}
