import { randomBytes } from 'node:crypto';
import { AppError } from '../errors/app-error';
import { servesAdapters } from '../placement/adapter-residency';
import { takesWork } from '../placement/filters';
import { pickBest } from '../placement/pick';
import type { AgentConnection, ConnectionOwner } from './agent-connection';
import { Job, type DispatchRequest, type JobListener } from './job';

/**
 * Routes jobs to the least-loaded ready replica of a deployment and relays their events.
 * All state is in memory: a job lives exactly as long as the agent stream that carries it.
 */
export class Dispatcher implements ConnectionOwner {
  private readonly pools = new Map<string, AgentConnection[]>();
  private readonly idPrefix = `job_${randomBytes(4).toString('hex')}`;
  private sequence = 0;
  private rotation = 0;
  private readonly capacityListeners: Array<(deploymentId: string) => void> = [];

  /** Called whenever a deployment may have gained a free slot (an agent joined, a job left). */
  onCapacity(listener: (deploymentId: string) => void): void {
    this.capacityListeners.push(listener);
  }

  register(connection: AgentConnection): void {
    const pool = this.pools.get(connection.deploymentId) ?? [];
    pool.push(connection);
    this.pools.set(connection.deploymentId, pool);
    this.capacityChanged(connection.deploymentId);
  }

  unregister(connection: AgentConnection): void {
    const pool = this.pools.get(connection.deploymentId);
    if (!pool) return;
    const index = pool.indexOf(connection);
    if (index >= 0) pool.splice(index, 1);
    if (pool.length === 0) this.pools.delete(connection.deploymentId);
  }

  connections(deploymentId?: string): readonly AgentConnection[] {
    if (deploymentId) return this.pools.get(deploymentId) ?? [];
    return [...this.pools.values()].flat();
  }

  readyReplicas(deploymentId: string): number {
    return this.connections(deploymentId).filter((connection) => !connection.draining).length;
  }

  /** The ready replica here with the least load relative to its concurrency (ties rotate), or null. */
  leastLoaded(deploymentId: string): AgentConnection | null {
    return this.pick(deploymentId, null);
  }

  /** Sends the job to a replica now; throws `no_replica_available` when none is connected. */
  dispatch(request: DispatchRequest, listener: JobListener): Job {
    const connection = this.pick(request.deploymentId, null, request.adapter !== undefined && request.adapter !== null);
    if (!connection) {
      throw new AppError('no_replica_available', 'no replica of this deployment is ready; retry shortly', { retryAfterSeconds: 5 });
    }
    return this.dispatchTo(connection, request, listener);
  }

  retry(job: Job, from: AgentConnection): void {
    // A guest's job may only run in a slot the shared pool admitted it to; the guest retries.
    // A batch line may only take a slot idle now: its runner puts it back in the batch instead.
    const next = job.attempts < 3 && !job.request.guest && !job.request.batch
      ? this.pick(job.request.deploymentId, from, job.request.adapter !== undefined && job.request.adapter !== null) : null;
    if (!next) {
      job.finished = true;
      job.listener.onFailed({ code: 'agent_draining', message: 'every replica of this deployment is draining', engineStatus: 0, engineBody: null, usage: undefined });
      return;
    }
    job.attempts++;
    next.assign(job);
  }

  released(connection: AgentConnection): void {
    if (this.capacityListeners.length > 0) this.capacityChanged(connection.deploymentId);
  }

  /** Sends the job to this connection (a scheduler that claimed work for it chose it). */
  dispatchTo(connection: AgentConnection, request: DispatchRequest, listener: JobListener): Job {
    const job = new Job(`${this.idPrefix}${(this.sequence++).toString(36)}`, request, listener, connection);
    connection.assign(job);
    return job;
  }

  private capacityChanged(deploymentId: string): void {
    for (const listener of this.capacityListeners) listener(deploymentId);
  }

  drainAll(reason: string): void {
    for (const connection of this.connections()) connection.drain(reason);
  }

  /**
   * Least loaded relative to its concurrency (as a live job sees it); ties rotate so equal
   * replicas share work. A job addressed to an adapter takes only a replica with adapter slots.
   */
  private pick(deploymentId: string, exclude: AgentConnection | null, adapter = false): AgentConnection | null {
    const pool = this.pools.get(deploymentId);
    if (!pool) return null;
    const passes = exclude === null && !adapter ? takesWork
      : (candidate: AgentConnection) => candidate !== exclude && takesWork(candidate) && (!adapter || servesAdapters(candidate));
    return pickBest(pool, lessLoaded, null, passes, this.rotation++ % pool.length);
  }
}

/** The pick's score: the lower a replica's live load, the better. */
const lessLoaded = (connection: AgentConnection): number => -connection.liveLoad;
