import type { RelayJob } from '../../proto/cluster/v1';
import type { Assign } from '../../proto/worker/v1';
import type { DispatchRequest } from './job';

/**
 * A job request as it travels on the wire, in one place: the `Assign` an agent gets
 * (worker.v1), and the `RelayJob` a peer server gets and turns back into a request
 * (cluster.v1). A field a request leaves unset stays unset in its Assign (proto3 sends an
 * explicit `false` or `0`, so `undefined` and a default are different bytes).
 */

/** The Assign of `request` for an agent; only a `flowControl` agent (its Hello said so) gets the stream window. */
export function toAssign(jobId: string, request: DispatchRequest, flowControl: boolean): Assign {
  const assign = assignOf(jobId, request, flowControl && request.stream ? request.streamWindowBytes ?? 0 : 0);
  assign.inputs = request.inputs;
  assign.uploads = request.uploads;
  assign.inlineOutputs = request.inlineOutputs;
  // Unset for live jobs (proto3 would send an explicit `false` as a field on the wire).
  if (request.batch) assign.batch = true;
  return assign;
}

/**
 * `request` for a peer server that holds a replica of its deployment. Relayed jobs are text
 * and embedding jobs (cluster/job-router.ts), so no media files; `job_id` is chosen by the
 * called server, and the window goes as it is: the called server's own `toAssign` decides
 * whether its agent gets it.
 */
export function toRelayJob(request: DispatchRequest): RelayJob {
  const job: Partial<RelayJob> & Pick<RelayJob, 'deploymentId' | 'assign'> = { deploymentId: request.deploymentId, assign: assignOf('', request, request.streamWindowBytes ?? 0) };
  // Unset stays off the wire (an explicit '' would be sent): only a routed job names its replica.
  if (request.replicaId) job.replicaId = request.replicaId;
  return job as RelayJob;
}

/** The request a peer relayed (`toRelayJob` on its side), to dispatch here. */
export function fromRelayJob(job: RelayJob): DispatchRequest {
  const { assign } = job;
  return {
    deploymentId: job.deploymentId, kind: assign.kind, body: assign.body, stream: assign.stream, includeUsage: assign.includeUsage,
    model: assign.model, deadlineUnixMs: assign.deadlineUnixMs, guest: assign.guest, embedding: assign.embedding ?? undefined,
    // The relaying server's gateway holds the client: its window is the one the agent must keep.
    streamWindowBytes: assign.streamWindowBytes ?? 0,
    // Derived by the relaying server from the cluster's key: the same salt this server would give.
    ...(assign.cacheSalt ? { cacheSalt: assign.cacheSalt } : {}),
    ...(job.replicaId ? { replicaId: job.replicaId } : {}),
    // The relaying server's dispatch span: this server's relay span is its child (it sets its own before the Assign goes out).
    ...(assign.traceparent ? { traceparent: assign.traceparent } : {}),
    ...(assign.adapter ? { adapter: assign.adapter } : {}),
  };
}

/** The fields every Assign takes from its request. */
function assignOf(jobId: string, request: DispatchRequest, streamWindowBytes: number): Assign {
  const assign: Assign = {
    jobId, kind: request.kind, deadlineUnixMs: request.deadlineUnixMs, body: request.body, stream: request.stream,
    includeUsage: request.includeUsage, model: request.model, guest: request.guest, embedding: request.embedding,
    streamWindowBytes,
  };
  if (request.cacheSalt) assign.cacheSalt = request.cacheSalt;
  if (request.traceparent) assign.traceparent = request.traceparent;
  if (request.adapter) assign.adapter = request.adapter;
  return assign;
}
