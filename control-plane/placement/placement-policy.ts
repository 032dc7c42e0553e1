/**
 * How an owner's text job picks one of its deployment's replicas: the policy its deployment's
 * `routingPolicy` setting names (the table in policies.ts).
 */

/** A deployment's routing policy (its `routingPolicy` setting). */
export const ROUTING_POLICIES = ['prefix-aware', 'least-loaded', 'round-robin'] as const;
export type RoutingPolicyName = (typeof ROUTING_POLICIES)[number];
export const DEFAULT_ROUTING_POLICY: RoutingPolicyName = 'prefix-aware';

/**
 * Why a replica was chosen, counted in `/metrics` (`routing_decisions_total{reason}`):
 * - `prefix_hit`: the replica the prompt's key ranks first, which this server has sent that
 *   application's prompts to before (its engine should hold the prefix);
 * - `prefix_cold`: the replica the key ranks first, but no request of that application went
 *   there from this server yet (the first of its prompts; or another server sent them);
 * - `load_fallback`: the first-ranked replica was loaded beyond the bound, so the next one under it;
 * - `no_prefix`: nothing any replica can hold yet (no prompt, or a first user message with no
 *   instructions): least loaded;
 * - `only_replica`: one replica takes work (or none here and the job queues): no choice to make;
 * - `least_loaded`, `round_robin`: the deployment chose that policy.
 *
 * A job addressed to a LoRA adapter under `prefix-aware` (adapter-aware.ts):
 * - `adapter_resident`, `adapter_loading`, `adapter_cpu`: a replica under the bound (or, when
 *   every holder is at it, with a free request slot) holds it ready in the engine, is loading
 *   it, or keeps it in host memory;
 * - `adapter_home`: held nowhere, so its home (the replica its name ranks first) loads it;
 * - `adapter_free_slot`, `adapter_evict`: held nowhere and its home is at the bound, so the
 *   next replica of its rendezvous order under the bound, which has a free adapter slot or
 *   evicts its least recently used adapter;
 * - `adapter_load_fallback`: every replica holding it is full, so the next replica of its
 *   rendezvous order under the bound loads it too (a hot adapter's copies).
 */
export type RoutingReason =
  | 'prefix_hit' | 'prefix_cold' | 'load_fallback' | 'no_prefix' | 'only_replica' | 'least_loaded' | 'round_robin'
  | 'adapter_resident' | 'adapter_loading' | 'adapter_cpu' | 'adapter_home' | 'adapter_free_slot' | 'adapter_evict' | 'adapter_load_fallback';

/** A replica the policy may choose: on this server or a peer's (with load as its last heartbeat told). */
export interface RouteCandidate {
  readonly replicaId: string;
  /** Jobs sent to it and not finished (running in the engine or waiting for it). */
  readonly load: number;
  /** Jobs it runs at once (`maxConcurrency`); beyond that they wait in its queue. */
  readonly capacity: number;
}

/** What a policy may read of the request: the parsed body its prompt key is read from, and the workspace the job is for. */
export interface PromptSource {
  readonly fields: Record<string, unknown>;
  /** Its prompt key is its own (prompt-key.ts), as its prefix cache is. */
  readonly tenant: string;
}

/**
 * The deployment's replicas taking work, here and on peers, as the caller (the job router)
 * knows them. A policy asks only for what it needs: most requests never build the list.
 */
export interface ReplicaSource<C extends RouteCandidate> {
  /** More than one replica takes work (counted without building the list). */
  hasChoice(deploymentId: string): boolean;
  /** Every replica taking work: this server's (load now) and peers' (as last reported). */
  candidates(deploymentId: string): C[];
}

/**
 * A policy's decision and its reason (the metric's label). `chosen` null: the policy leaves
 * the job to load placement (a free slot here first: the dispatcher's least-loaded replica,
 * else a peer's; cluster/job-router.ts).
 */
export interface PolicyChoice<C> {
  readonly chosen: C | null;
  readonly reason: RoutingReason;
}

export interface PlacementPolicy {
  readonly name: RoutingPolicyName;
  choose<C extends RouteCandidate>(deploymentId: string, prompt: PromptSource, replicas: ReplicaSource<C>): PolicyChoice<C>;
}

/** One replica takes work (or none here and the job queues): no choice to make. */
export const ONLY_REPLICA: PolicyChoice<never> = { chosen: null, reason: 'only_replica' };
