import { Field, Float, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';

/** The autoscaling policies a deployment may run (control-plane/autoscaling/scaling-policy.ts); the values are the stored names. */
export enum ScalingPolicy {
  CONCURRENCY = 'concurrency',
  SLO = 'slo',
}
registerEnumType(ScalingPolicy, {
  name: 'ScalingPolicy',
  description: 'CONCURRENCY: in-flight plus queued requests per replica against the model\'s target (the default); '
    + 'SLO: as many replicas as the deployment\'s SLO needs, from a forecast of its arrival rate and the engines\' queue and KV-cache use',
});

const SLO_TTFT = 'Time to first token, 95th percentile, ms (text: chat and completion models; 50 to 3600000, and at least what an idle replica takes)';
const SLO_TPOT = 'Time per output token after the first, 95th percentile, ms (text: chat and completion models; 5 to 60000)';
const SLO_QUEUE_WAIT = 'Wait in the queue before a job starts, 95th percentile, ms (image and video models; 100 to 3600000)';

@ObjectType('DeploymentSlo', { description: 'What the deployment promises its callers; a target not stated is null' })
export class DeploymentSloType {
  @Field(() => Int, { nullable: true, description: SLO_TTFT }) ttftP95Ms: number | null;
  @Field(() => Int, { nullable: true, description: SLO_TPOT }) tpotP95Ms: number | null;
  @Field(() => Int, { nullable: true, description: SLO_QUEUE_WAIT }) queueWaitP95Ms: number | null;
}

@InputType('DeploymentSloInput', { description: 'The whole SLO: a target left out or null is not stated' })
export class DeploymentSloInput {
  @Field(() => Int, { nullable: true, description: SLO_TTFT }) ttftP95Ms?: number | null;
  @Field(() => Int, { nullable: true, description: SLO_TPOT }) tpotP95Ms?: number | null;
  @Field(() => Int, { nullable: true, description: SLO_QUEUE_WAIT }) queueWaitP95Ms?: number | null;
}

const SCALING_POLICY = 'How the autoscaler decides (default CONCURRENCY); SLO needs slo.ttftP95Ms (text) or slo.queueWaitP95Ms (media)';
const SCALE_TO_ZERO = 'After this many seconds without a request every replica is given back (60 to 86400); null: never below max(1, minReplicas)';
const COLD_START_QUEUE = 'Requests that may wait at each server for a first replica to start (1 to 10000, default 100); past it 503 with Retry-After';

@ObjectType('StartupPhase', { description: 'One timed phase of a replica\'s start-up (docs/autoscaling.md#cold-starts)' })
export class StartupPhaseType {
  @Field({ description: 'provision (placement to its agent\'s Hello), download (the weights, or the cache hit that skipped it), load (the engine loading them), warm_up (a first tiny request)' })
  name: string;
  @Field() startedAt: Date;
  @Field(() => Float, { description: 'How long it took; while it runs (done false), how long it had run when last reported' }) durationMs: number;
  @Field({ description: 'False: the start-up was in this phase when last heard of (where a replica that never became ready stuck)' }) done: boolean;
  @Field({ description: 'What the phase did: "cache hit (1.2 GiB)", "fetched 640 MiB", "skipped: the engine answered 404"' }) detail: string;
  @Field(() => Float, { nullable: true, description: 'download: the model\'s bytes, fetched or found in the cache; null for other phases' }) bytes: number | null;
}

@ObjectType('Replica', { description: 'One running copy of a deployment (a worker agent and its engine)' })
export class ReplicaType {
  @Field(() => ID) id: string;
  @Field({ description: 'Creating, Running, Unhealthy or Terminated' }) status: string;
  @Field(() => String, { nullable: true }) statusReason: string | null;
  @Field() provider: string;
  @Field(() => String, { nullable: true }) agentId: string | null;
  @Field(() => String, { nullable: true }) engineKind: string | null;
  @Field(() => String, { nullable: true }) engineVersion: string | null;
  @Field(() => Int, { nullable: true }) maxConcurrency: number | null;
  @Field(() => String, { nullable: true, description: 'The capacity offer it was placed on' }) offerId: string | null;
  @Field(() => String, { nullable: true }) gpuName: string | null;
  @Field(() => Float, { nullable: true }) gpuMemoryGb: number | null;
  @Field(() => String, { nullable: true }) region: string | null;
  @Field(() => Float, { description: 'What it costs per hour while Running (the offer\'s price when placed)' }) pricePerHour: number;
  @Field(() => Int, { nullable: true, description: 'Model download / load progress while Creating, 0–100' }) loadPercent: number | null;
  @Field() createdAt: Date;
  @Field(() => Date, { nullable: true, description: 'When its engine first reported ready: the end of its cold start' }) startedAt: Date | null;
  @Field(() => Date, { nullable: true }) lastSeenAt: Date | null;
  @Field(() => Date, { nullable: true }) terminatedAt: Date | null;
  @Field(() => [StartupPhaseType], { description: 'Its start-up phase by phase, as last reported (final once it is ready); empty for agents older than start-up phases' })
  startupPhases: StartupPhaseType[];
  @Field(() => Float, { nullable: true, description: 'Placement to ready, in milliseconds (its cold start); null while it never was ready' }) startupMs: number | null;
  @Field(() => String, { nullable: true, description: 'Why it was replaced without ever becoming ready: deadline (not ready within REPLICA_START_DEADLINE_MS), exited (its agent or engine exited while starting) or provider_failed (its pod could not start); null otherwise' })
  startFailure: string | null;
}

@ObjectType('Deployment', { description: 'One model served at its own OpenAI-compatible endpoint' })
export class DeploymentType {
  @Field(() => ID) id: string;
  @Field() modelId: string;
  @Field() slug: string;
  @Field({ description: 'OpenAI base URL of this deployment, ending in /v1' }) baseUrl: string;
  @Field({ description: 'Creating, Running, Paused or Deleted' }) status: string;
  @Field(() => String, { nullable: true }) statusReason: string | null;
  @Field(() => Float, { description: 'Max price per replica-hour' }) priceCapPerHour: number;
  @Field(() => Int) minReplicas: number;
  @Field(() => Int) maxReplicas: number;
  @Field() autoscale: boolean;
  @Field(() => Int, { description: 'Replicas it should have now: min when autoscale is off, else the autoscaler\'s choice' }) desiredReplicas: number;
  @Field({ description: 'local (agents on this host), market (rented GPUs), static (operator hosts), kubernetes (pods on a cluster) or external (agents join with a token)' }) provider: string;
  @Field(() => Int, { nullable: true, description: 'While Creating: the least load progress (0–100) of the replicas starting' }) progress: number | null;
  @Field({ description: 'Whether the owner opens this deployment\'s idle capacity to guests of shared serving' }) shareIdleCapacity: boolean;
  @Field({
    description: 'Sharing of idle capacity: not_shared; activating ("Sharing: Activating...": the rolling restart that turns on priority scheduling '
      + 'is replacing replicas one at a time, and with a single replica the endpoint answers 503 while it restarts); shared (the "Shared" badge: every replica runs with priority scheduling and guests are admitted into idle slots)',
  }) sharing: string;
  @Field(() => Int, { nullable: true, description: 'Image/video models: the default output bucket (a storage credential); null = Managed' })
  storageCredentialId: number | null;
  @Field({ description: 'How a text request picks one of the replicas: prefix-aware (default: where its prompt\'s prefix should be cached, within a load bound), least-loaded or round-robin' }) routingPolicy: string;
  @Field(() => Int, { description: 'LoRA adapter slots per replica, ready in the engine at once (vLLM --max-loras); 0: no adapter is served' }) maxLoras: number;
  @Field(() => Int, { description: 'Adapters kept in host memory per replica beyond maxLoras, 0 to 4096 (vLLM gets --max-cpu-loras maxLoras + maxCpuLoras)' }) maxCpuLoras: number;
  @Field(() => Int, { description: 'The largest LoRA rank the engines accept (vLLM --max-lora-rank): 8, 16, 32, 64, 128 or 256' }) maxLoraRank: number;
  @Field(() => ScalingPolicy, { description: 'How the autoscaler decides: CONCURRENCY or SLO' }) scalingPolicy: ScalingPolicy;
  @Field(() => DeploymentSloType, { nullable: true, description: 'The SLO; null when none is stated' }) slo: DeploymentSloType | null;
  @Field(() => Int, { nullable: true, description: SCALE_TO_ZERO }) scaleToZeroAfterSeconds: number | null;
  @Field(() => Int, { description: COLD_START_QUEUE }) coldStartQueueLimit: number;
  @Field(() => Int, { description: 'Replicas replaced because they never became ready (start-up deadline, an agent that exited while starting, a pod that could not start); each in a row doubles the wait before the next' })
  replicaStartFailures: number;
  @Field() createdAt: Date;
  @Field() updatedAt: Date;
}

@ObjectType()
export class CreateDeploymentPayload {
  @Field(() => DeploymentType) deployment: DeploymentType;
  @Field(() => String, { nullable: true, description: 'For external deployments: the token agents join with, shown once' })
  joinToken: string | null;
}

@InputType({ description: 'Fields left out keep their value' })
export class UpdateDeploymentInput {
  @Field(() => Float, { nullable: true }) priceCapPerHour?: number;
  @Field(() => Int, { nullable: true }) minReplicas?: number;
  @Field(() => Int, { nullable: true }) maxReplicas?: number;
  @Field({ nullable: true }) autoscale?: boolean;
  @Field(() => Int, { nullable: true, description: 'A verified storage credential; send clearStorageCredential to go back to Managed' }) storageCredentialId?: number;
  @Field({ nullable: true, description: 'true: outputs go to Managed storage again' }) clearStorageCredential?: boolean;
  @Field({
    nullable: true,
    description: 'true opens idle capacity to guests (official chat models with shared prices, on a provider the platform launches): a rolling restart, one replica at a time, '
      + 'turns on priority scheduling, and with one replica the endpoint answers 503 for the restart; false stops new guest work at once (running guest requests finish)',
  }) shareIdleCapacity?: boolean;  @Field({ nullable: true, description: 'How a text request picks one of the replicas: prefix-aware (default: where its prompt\'s prefix should be cached, within a load bound), least-loaded or round-robin' }) routingPolicy?: string;
  @Field(() => Int, { nullable: true, description: 'LoRA adapter slots per replica (default 4; 0 to 256); engines read it at start, so replicas placed from now on get it' }) maxLoras?: number;
  @Field(() => Int, { nullable: true, description: 'Adapters kept in host memory per replica beyond maxLoras (default 0; 0 to 4096)' }) maxCpuLoras?: number;
  @Field(() => Int, { nullable: true, description: 'The largest LoRA rank accepted (default 64): 8, 16, 32, 64, 128 or 256' }) maxLoraRank?: number;
  @Field(() => ScalingPolicy, { nullable: true, description: SCALING_POLICY }) scalingPolicy?: ScalingPolicy;
  @Field(() => DeploymentSloInput, { nullable: true, description: 'Replaces the whole SLO; null clears it' }) slo?: DeploymentSloInput | null;
  @Field(() => Int, { nullable: true, description: `${SCALE_TO_ZERO}; send null to turn it off` }) scaleToZeroAfterSeconds?: number | null;
  @Field(() => Int, { nullable: true, description: COLD_START_QUEUE }) coldStartQueueLimit?: number;
}

@ObjectType('ScalingDecision', { description: 'One autoscaler decision with every input it used' })
export class ScalingDecisionType {
  @Field() decidedAt: Date;
  @Field({ description: 'scale_up, scale_down or hold' }) action: string;
  @Field({ description: 'within_tolerance, scale_up, scale_down, stabilizing_up, stabilizing_down, step_limited, at_max, at_min, capped_by_price, autoscale_off' })
  reason: string;
  @Field() explanation: string;
  @Field(() => Float, { description: 'Smoothed in-flight + queued requests' }) signal: number;
  @Field(() => Int) targetConcurrency: number;
  @Field(() => Int) currentReplicas: number;
  @Field(() => Int, { description: 'What the load alone asks for' }) wantedReplicas: number;
  @Field(() => Int, { description: 'What the deployment was set to' }) desiredReplicas: number;
  @Field(() => String, { description: 'The raw observation and settings, as JSON' }) inputs: string;
  @Field({ description: 'The policy that decided: concurrency or slo (decisions from before policies existed: concurrency)' }) policy: string;
  @Field(() => String, {
    nullable: true,
    description: 'Which input moved the decision: in_flight (concurrency), forecast, queue, kv_cache, observed_p95, waiting (a cold start), idle (scale to zero); null on older decisions',
  }) movedBy: string | null;
  @Field(() => Float, { nullable: true, description: 'The arrival rate the policy forecast one replica start-up ahead, req/s; null when it does not forecast' })
  forecastArrivalsPerSecond: number | null;
  @Field(() => Float, { nullable: true, description: 'Owner requests that arrived per second, over every server; null when not measured' })
  arrivalsPerSecond: number | null;
}

@InputType()
export class CreateDeploymentInput {
  @Field() modelId: string;
  @Field(() => Float) priceCapPerHour: number;
  @Field(() => Int, { defaultValue: 1 }) minReplicas: number;
  @Field(() => Int, { defaultValue: 1 }) maxReplicas: number;
  @Field({ defaultValue: false }) autoscale: boolean;
  @Field({ defaultValue: 'local' }) provider: string;
  @Field(() => Int, { nullable: true, description: 'Image/video models: a verified storage credential as the default output bucket' })
  storageCredentialId?: number | null;
  @Field({ defaultValue: false, description: 'Open idle capacity to guests of shared serving (see updateDeployment)' }) shareIdleCapacity: boolean;  @Field({ nullable: true, description: 'How a text request picks one of the replicas: prefix-aware (default: where its prompt\'s prefix should be cached, within a load bound), least-loaded or round-robin' }) routingPolicy?: string;
  @Field(() => Int, { nullable: true, description: 'LoRA adapter slots per replica (default 4; 0 to 256); engines read it at start, so replicas placed from now on get it' }) maxLoras?: number;
  @Field(() => Int, { nullable: true, description: 'Adapters kept in host memory per replica beyond maxLoras (default 0; 0 to 4096)' }) maxCpuLoras?: number;
  @Field(() => Int, { nullable: true, description: 'The largest LoRA rank accepted (default 64): 8, 16, 32, 64, 128 or 256' }) maxLoraRank?: number;
  @Field(() => ScalingPolicy, { nullable: true, description: SCALING_POLICY }) scalingPolicy?: ScalingPolicy;
  @Field(() => DeploymentSloInput, { nullable: true, description: 'The SLO; absent: none stated' }) slo?: DeploymentSloInput | null;
  @Field(() => Int, { nullable: true, description: `${SCALE_TO_ZERO} (the default)` }) scaleToZeroAfterSeconds?: number | null;
  @Field(() => Int, { nullable: true, description: COLD_START_QUEUE }) coldStartQueueLimit?: number;
}
