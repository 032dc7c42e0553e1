import type { DataSource, EntityManager, Repository } from 'typeorm';
import { AppError } from '../errors/app-error';
import { RequestRecord, type RequestModality, type RequestStatus } from './request-record.entity';
import { shortened } from '../errors/quote-value';

declare module '../events/control-plane-events' {
  interface ControlPlaneEventMap {
    /** A request record changed status or progress (on this server, or on another one: re-emitted by cluster/event-bridge.ts). */
    requestUpdated: [RequestRecord];
  }
}

export interface RequestFilter {
  readonly status?: RequestStatus;
  readonly modality?: RequestModality;
}

/** Runs inside the transaction that made a record terminal (the webhook outbox writes its event here). */
export type TerminalHook = (manager: EntityManager, record: RequestRecord) => Promise<void>;

export interface ClaimOptions {
  replicaId: string;
  leaseOwner: string;
  leaseMs: number;
  /** How long the job may run once started (docs/api-contract.md: images 5 min, videos 30 min). */
  timeoutMs: (record: Pick<RequestRecord, 'modality'>) => number;
  /**
   * A record queued longer than this is not started: the sweep fails it (`model_timeout`), as
   * its submitter was promised. Claiming it instead raced the sweep.
   */
  queueTtlMs: number;
}

export type TerminalPatch = Partial<Pick<RequestRecord,
  'errorCode' | 'errorMessage' | 'outputKeys' | 'outputObjectKey' | 'outputBucket' | 'storageProvider'
  | 'billedGpuSeconds' | 'outputsExpireAt' | 'progress'>>;

/**
 * The request_records table and its state machine. Every status change is one conditional
 * UPDATE (`WHERE status IN (…)`), so two servers racing on a record (a cancel and a claim, a
 * completion and a lease sweep) can never both win; terminal changes run the terminal hooks
 * in the same transaction.
 */
export class RequestRecords {
  readonly repository: Repository<RequestRecord>;
  private readonly terminalHooks: TerminalHook[] = [];

  constructor(private readonly dataSource: DataSource) {
    this.repository = dataSource.getRepository(RequestRecord);
  }

  onTerminal(hook: TerminalHook): void {
    this.terminalHooks.push(hook);
  }

  async find(id: string): Promise<RequestRecord | null> {
    return await this.repository.findOne({ where: { id } });
  }

  /** The record if it belongs to the workspace: 404 when unknown, 403 when another workspace's. */
  async owned(workspaceId: string, id: string): Promise<RequestRecord> {
    const record = /^req_[0-9a-f]{1,64}$/.test(id) ? await this.find(id) : null;
    if (!record) throw new AppError('not_found', `no request '${shortened(id)}'`, { param: 'id' });
    if (record.workspaceId !== workspaceId) throw new AppError('permission_denied', `request '${shortened(id)}' belongs to another workspace`, { param: 'id' });
    return record;
  }

  async insert(record: RequestRecord): Promise<RequestRecord> {
    return await this.repository.save(record);
  }

  /** Newest first; `status` optional. */
  async list(deploymentId: string, filter: RequestFilter, limit: number): Promise<RequestRecord[]> {
    return await this.repository.find({
      where: { deploymentId, ...(filter.status ? { status: filter.status } : {}), ...(filter.modality ? { modality: filter.modality } : {}) },
      order: { queuedAt: 'DESC', id: 'DESC' },
      take: limit,
    });
  }

  async byIdempotencyKey(workspaceId: string, idempotencyKey: string): Promise<RequestRecord | null> {
    return await this.repository.findOne({ where: { workspaceId, idempotencyKey } });
  }

  /** Frees a key past its window for a new submission; the old record keeps everything else. */
  async releaseIdempotencyKey(id: string, idempotencyKey: string): Promise<void> {
    await this.repository.update({ id, idempotencyKey }, { idempotencyKey: null });
  }

  async countQueued(deploymentId: string): Promise<number> {
    return await this.repository.count({ where: { deploymentId, status: 'queued' } });
  }

  /** Deployments that have queued work (the sweep wakes their schedulers). */
  async deploymentsWithQueuedWork(): Promise<string[]> {
    const rows: Array<{ deployment_id: string }> = await this.dataSource.query(
      `SELECT DISTINCT deployment_id FROM request_records WHERE status = 'queued'`);
    return rows.map((row) => row.deployment_id);
  }

  /**
   * Takes the oldest queued job of the deployment for a replica. SKIP LOCKED: concurrent
   * claimers (other servers, other replicas) each get a different row, never the same one.
   */
  async claim(deploymentId: string, options: ClaimOptions): Promise<RequestRecord | null> {
    const rows: Array<Record<string, unknown>> = await this.dataSource.query(`
      UPDATE request_records SET status = 'running', started_at = clock_timestamp(), replica_id = $2, lease_owner = $3,
        lease_expires_at = clock_timestamp() + $4::bigint * interval '1 millisecond',
        deadline_at = clock_timestamp() + (CASE WHEN modality = 'video' THEN $5::bigint ELSE $6::bigint END) * interval '1 millisecond'
      WHERE id = (SELECT id FROM request_records WHERE deployment_id = $1 AND status = 'queued'
                    AND queued_at >= clock_timestamp() - $7::bigint * interval '1 millisecond'
                  ORDER BY queued_at, id FOR UPDATE SKIP LOCKED LIMIT 1)
      RETURNING *`,
    [deploymentId, options.replicaId, options.leaseOwner, options.leaseMs,
      options.timeoutMs({ modality: 'video' }), options.timeoutMs({ modality: 'image' }), options.queueTtlMs]);
    const [claimed] = (Array.isArray(rows[0]) ? rows[0] : rows) as Array<Record<string, unknown>>;
    return claimed ? this.fromRow(claimed) : null;
  }

  /** An entity from a raw `RETURNING *` row (column names and transformers from the entity's metadata). */
  private fromRow(row: Record<string, unknown>): RequestRecord {
    const record = this.repository.create();
    for (const column of this.repository.metadata.columns) {
      const value = row[column.databaseName];
      const transformer = column.transformer as { from(value: unknown): unknown } | undefined;
      (record as unknown as Record<string, unknown>)[column.propertyName] = transformer && !Array.isArray(transformer) ? transformer.from(value) : value;
    }
    return record;
  }

  /** Moves a record from one of `from` to a terminal status; null when it had already left `from`. */
  async finish(id: string, from: RequestStatus[], to: 'succeeded' | 'failed' | 'canceled', patch: TerminalPatch = {}): Promise<RequestRecord | null> {
    return await this.dataSource.transaction(async (manager) => {
      const result = await manager.createQueryBuilder().update(RequestRecord)
        .set({ ...patch, status: to, completedAt: () => 'clock_timestamp()', leaseOwner: null, leaseExpiresAt: null, ...(to === 'succeeded' ? {} : { billedGpuSeconds: 0 }) })
        .where('id = :id AND status IN (:...from)', { id, from })
        .execute();
      if (!result.affected) return null;
      const record = (await manager.findOne(RequestRecord, { where: { id } }))!;
      for (const hook of this.terminalHooks) await hook(manager, record);
      return record;
    });
  }

  /**
   * Puts a running record back in the queue: only for a job an agent refused before its
   * engine saw it (the agent was draining), so it is not run twice by being run again.
   */
  async requeue(id: string): Promise<RequestRecord | null> {
    const result = await this.repository.update({ id, status: 'running', sync: false }, {
      status: 'queued', startedAt: null, replicaId: null, leaseOwner: null, leaseExpiresAt: null, deadlineAt: null, progress: 0,
    });
    return result.affected ? await this.find(id) : null;
  }

  async setProgress(id: string, progress: number): Promise<void> {
    await this.repository.update({ id, status: 'running' }, { progress });
  }

  /** The owner's running jobs stay claimed: another server may take over only after the lease lapses. */
  async renewLeases(owner: string, ids: string[], leaseMs: number): Promise<void> {
    if (ids.length === 0) return;
    await this.dataSource.query(
      `UPDATE request_records SET lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
       WHERE id = ANY($2) AND status = 'running' AND lease_owner = $1`, [owner, ids, leaseMs]);
  }

  /** Running records whose server stopped renewing them, or past their deadline; queued records past the queue limit. */
  async overdue(queueTtlMs: number, limit = 100): Promise<{ leaseLost: string[]; deadlinePassed: string[]; expiredInQueue: string[] }> {
    const rows: Array<{ id: string; reason: string }> = await this.dataSource.query(`
      SELECT id, CASE WHEN status = 'queued' THEN 'queue' WHEN deadline_at < clock_timestamp() THEN 'deadline' ELSE 'lease' END AS reason
      FROM request_records
      WHERE (status = 'running' AND (lease_expires_at < clock_timestamp() OR deadline_at < clock_timestamp()))
         OR (status = 'queued' AND queued_at < clock_timestamp() - $1::bigint * interval '1 millisecond')
      LIMIT $2`, [queueTtlMs, limit]);
    const pick = (reason: string) => rows.filter((row) => row.reason === reason).map((row) => row.id);
    return { leaseLost: pick('lease'), deadlinePassed: pick('deadline'), expiredInQueue: pick('queue') };
  }
}
