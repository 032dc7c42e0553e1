import type { AdapterRef } from '../../proto/worker/v1';
import type { Deployment } from '../deployments/deployment.entity';
import type { FinishedRequest } from './finished-request';

/** A request's `model` resolved to a LoRA adapter of its workspace on its deployment. */
export interface AddressedAdapter {
  /** What the agent loads and the engine is sent (`Assign.adapter`). */
  readonly ref: AdapterRef;
  /** What usage, the request log and the trace record. */
  readonly adapter: NonNullable<FinishedRequest['adapter']>;
}

/**
 * How the pipeline learns that `model` names an adapter (docs/adapters.md#addressing). Declared
 * here and implemented in adapters/ (which builds on batches/ and so sits above the pipeline).
 * Answers from a cache: never a query per request.
 */
export interface AdapterAddressing {
  /**
   * The adapter `model` names among the workspace's, attached to `deployment`; null when
   * `model` is no adapter of the workspace attached there (the base model's checks then answer,
   * exactly as for a made-up name: another workspace's adapter is never told apart).
   */
  onDeployment(workspaceId: string, deployment: Pick<Deployment, 'id'>, model: string, deadlineUnixMs: number): Promise<AddressedAdapter | null>;
  /** The names of the workspace's adapters attached to the deployment (a batch's validation checks its lines' `model` against them). */
  namesOn(workspaceId: string, deploymentId: string): Promise<ReadonlySet<string>>;
}
