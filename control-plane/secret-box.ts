import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * AES-256-GCM for secrets the platform must read back (a customer's bucket secret), unlike API
 * keys, which are only hashed. Sealed form: iv (12 bytes) + tag (16) + ciphertext. The
 * associated data binds a sealed value to its owner, so a ciphertext copied into another
 * workspace's row does not decrypt there.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error(`the secret encryption key must be 32 bytes, got ${key.length}`);
  }

  seal(plaintext: string, associatedData: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(associatedData));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
  }

  /** Throws when the key, the associated data or any byte of `sealed` differs from sealing time. */
  open(sealed: Buffer, associatedData: string): string {
    if (sealed.length < IV_BYTES + TAG_BYTES) throw new Error('sealed secret is too short');
    const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(associatedData));
    decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}
