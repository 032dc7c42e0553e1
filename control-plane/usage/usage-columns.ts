import type { UsageRecord } from './usage-record.entity';

/** A record to write: a new one always names the deployment that ran it. */
export type UsageInput = Omit<UsageRecord, 'id' | 'deploymentId'> & { deploymentId: string };

/**
 * Usage records waiting for their batch INSERT, kept column by column. A record object (and
 * its Date) kept for the flush interval outlives a young-generation GC or two, so V8 copies and
 * then promotes it: a heap sample of the gateway under load put a third of everything it
 * promoted there. In columns, a record is a few references to strings that already exist
 * (ids, labels) and numbers in arrays V8 stores unboxed; the objects the INSERT needs are made
 * at flush time and die young.
 */
export class UsageColumns {
  private workspaceId: string[] = [];
  private apiKeyId: string[] = [];
  private deploymentId: string[] = [];
  private sharedModel: Array<string | null> = [];
  private replicaId: Array<string | null> = [];
  private endpoint: string[] = [];
  private status: string[] = [];
  private stream: boolean[] = [];
  private promptTokens: number[] = [];
  private completionTokens: number[] = [];
  private totalTokens: number[] = [];
  private latencyMs: number[] = [];
  private createdAtMs: number[] = [];
  private batchId: Array<string | null> = [];
  private adapterId: Array<string | null> = [];

  get length(): number {
    return this.workspaceId.length;
  }

  push(input: UsageInput): void {
    this.workspaceId.push(input.workspaceId);
    this.apiKeyId.push(input.apiKeyId);
    this.deploymentId.push(input.deploymentId);
    this.sharedModel.push(input.sharedModel ?? null);
    this.replicaId.push(input.replicaId);
    this.endpoint.push(input.endpoint);
    this.status.push(input.status);
    this.stream.push(input.stream);
    this.promptTokens.push(input.promptTokens);
    this.completionTokens.push(input.completionTokens);
    this.totalTokens.push(input.totalTokens);
    this.latencyMs.push(input.latencyMs);
    this.createdAtMs.push(input.createdAt.getTime());
    this.batchId.push(input.batchId ?? null);
    this.adapterId.push(input.adapterId ?? null);
  }

  /** The records, oldest first, as objects; the columns are left empty. */
  take(): UsageInput[] {
    const records: UsageInput[] = [];
    for (let index = 0; index < this.length; index++) {
      records.push({
        workspaceId: this.workspaceId[index], apiKeyId: this.apiKeyId[index], deploymentId: this.deploymentId[index], sharedModel: this.sharedModel[index],
        replicaId: this.replicaId[index], endpoint: this.endpoint[index], status: this.status[index], stream: this.stream[index],
        promptTokens: this.promptTokens[index], completionTokens: this.completionTokens[index], totalTokens: this.totalTokens[index],
        latencyMs: this.latencyMs[index], createdAt: new Date(this.createdAtMs[index]), batchId: this.batchId[index], adapterId: this.adapterId[index],
      });
    }
    this.clear();
    return records;
  }

  private clear(): void {
    this.workspaceId = [];
    this.apiKeyId = [];
    this.deploymentId = [];
    this.sharedModel = [];
    this.replicaId = [];
    this.endpoint = [];
    this.status = [];
    this.stream = [];
    this.promptTokens = [];
    this.completionTokens = [];
    this.totalTokens = [];
    this.latencyMs = [];
    this.createdAtMs = [];
    this.batchId = [];
    this.adapterId = [];
  }
}
