import type { DataSource, Repository } from 'typeorm';
import { newSecret } from '../secrets';
import type { SecretBox } from '../secret-box';
import { WebhookSigningSecret } from './webhook.entities';

export interface RevealedSecret {
  secret: string;
  rotatedAt: Date;
  /** Until then deliveries are signed with the previous secret too. */
  previousExpiresAt: Date | null;
}

const SECRET_PREFIX = 'whsec_';

/**
 * Each workspace's signing secret, created on first use and sealed at rest (it must be read
 * back to sign). A rotation keeps the previous secret signing for a grace period, so receivers
 * can switch without dropping a delivery.
 */
export class WebhookSecrets {
  private readonly secrets: Repository<WebhookSigningSecret>;

  constructor(dataSource: DataSource, private readonly box: SecretBox, private readonly now: () => number = Date.now) {
    this.secrets = dataSource.getRepository(WebhookSigningSecret);
  }

  /** The secrets a delivery is signed with, newest first. */
  async signingSecrets(workspaceId: string): Promise<string[]> {
    const row = await this.row(workspaceId);
    const secrets = [this.open(row.currentCiphertext, workspaceId)];
    if (row.previousCiphertext && row.previousExpiresAt && row.previousExpiresAt.getTime() > this.now()) {
      secrets.push(this.open(row.previousCiphertext, workspaceId));
    }
    return secrets;
  }

  async reveal(workspaceId: string): Promise<RevealedSecret> {
    const row = await this.row(workspaceId);
    const active = row.previousExpiresAt && row.previousExpiresAt.getTime() > this.now() ? row.previousExpiresAt : null;
    return { secret: this.open(row.currentCiphertext, workspaceId), rotatedAt: row.rotatedAt, previousExpiresAt: active };
  }

  /** A new secret now; the old one keeps signing for `graceSeconds` (0 retires it at once). */
  async rotate(workspaceId: string, graceSeconds: number): Promise<RevealedSecret> {
    const row = await this.row(workspaceId);
    const secret = newSecret(SECRET_PREFIX);
    const now = new Date(this.now());
    row.previousCiphertext = graceSeconds > 0 ? row.currentCiphertext : null;
    row.previousExpiresAt = graceSeconds > 0 ? new Date(now.getTime() + graceSeconds * 1000) : null;
    row.currentCiphertext = this.box.seal(secret, associatedData(workspaceId));
    row.rotatedAt = now;
    await this.secrets.save(row);
    return { secret, rotatedAt: now, previousExpiresAt: row.previousExpiresAt };
  }

  private async row(workspaceId: string): Promise<WebhookSigningSecret> {
    const existing = await this.secrets.findOne({ where: { workspaceId } });
    if (existing) return existing;
    // Two servers creating it at once: the first insert wins and both read the same secret.
    await this.secrets.createQueryBuilder().insert().values({
      workspaceId, currentCiphertext: this.box.seal(newSecret(SECRET_PREFIX), associatedData(workspaceId)),
      rotatedAt: new Date(this.now()), previousCiphertext: null, previousExpiresAt: null,
    }).orIgnore().execute();
    return (await this.secrets.findOne({ where: { workspaceId } }))!;
  }

  private open(sealed: Buffer, workspaceId: string): string {
    return this.box.open(sealed, associatedData(workspaceId));
  }
}

function associatedData(workspaceId: string): string {
  return `webhook_signing_secrets:${workspaceId}`;
}
