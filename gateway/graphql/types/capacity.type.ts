import { Field, Float, ID, InputType, Int, ObjectType } from 'type-graphql';
import { DecimalScalar } from './decimal.scalar';

@ObjectType('GpuOffer', { description: 'GPU capacity a provider can rent out now' })
export class GpuOfferType {
  @Field() id: string;
  @Field() provider: string;
  @Field() gpuName: string;
  @Field(() => Float) gpuMemoryGb: number;
  @Field() region: string;
  @Field(() => Float) pricePerHour: number;
  @Field(() => Int, { nullable: true, description: 'Machines left; null when unlimited (the local machine)' }) available: number | null;
}

@ObjectType('StaticHost', { description: 'A machine an operator registered at a set price' })
export class StaticHostType {
  @Field(() => ID) id: string;
  @Field() name: string;
  @Field() gpuName: string;
  @Field(() => Float) gpuMemoryGb: number;
  @Field() region: string;
  @Field(() => Float) pricePerHour: number;
  @Field(() => String, { nullable: true }) replicaId: string | null;
  @Field(() => [String], { description: 'Models whose weights its cache holds, as its agent\'s last Hello said (placement prefers it for them, at the same price)' })
  cachedModels: string[];
  @Field() createdAt: Date;
}

@ObjectType()
export class RegisterStaticHostPayload {
  @Field(() => StaticHostType) host: StaticHostType;
  @Field({ description: 'The agent on the host joins with this (WORKER_JOIN_TOKEN); shown once' }) hostToken: string;
}

@InputType()
export class StaticHostInput {
  @Field() name: string;
  @Field() gpuName: string;
  @Field(() => Float) gpuMemoryGb: number;
  @Field() region: string;
  @Field(() => Float) pricePerHour: number;
}

@InputType()
export class MarketOfferInput {
  @Field() id: string;
  @Field() gpuName: string;
  @Field(() => Float) gpuMemoryGb: number;
  @Field() region: string;
  @Field(() => Float) pricePerHour: number;
  @Field(() => Int) count: number;
}

@ObjectType('CostRow', { description: 'GPU cost of a day, deployment or replica' })
export class CostRowType {
  @Field({ description: 'YYYY-MM-DD (UTC), deployment id or replica id' }) key: string;
  @Field(() => String, { nullable: true, description: 'By deployment: its model id and slug (", deleted" when it is); else null' }) label: string | null;
  @Field(() => Float) gpuHours: number;
  @Field(() => DecimalScalar, { description: 'What the GPU time cost, in the price unit of the offers (USD)' }) amount: string;
}

@ObjectType('UsageRow', { description: 'Text requests and tokens of a day, deployment or API key' })
export class UsageRowType {
  @Field({ description: 'YYYY-MM-DD (UTC), deployment id or API key id; by deployment, calls on shared models (as a guest) are keyed by the shared model, shared/<model-id>' })
  key: string;
  @Field(() => String, {
    nullable: true, description: 'By deployment: its model id and slug (", deleted" when it is); by API key: its name and prefix (", revoked" when it is); else null',
  }) label: string | null;
  @Field(() => Int) requests: number;
  @Field(() => Float) promptTokens: number;
  @Field(() => Float) completionTokens: number;
  @Field(() => Float) totalTokens: number;
}

@ObjectType('ReplicaLoad', { description: 'A replica\'s load as its agent reported it' })
export class ReplicaLoadType {
  @Field(() => ID) replicaId: string;
  @Field(() => ID) deploymentId: string;
  @Field(() => Int) inFlight: number;
  @Field(() => Int) queued: number;
  @Field() engineHealth: string;
  @Field() at: Date;
  @Field(() => Float, { nullable: true, description: 'Mean ms from dispatch to the first chunk or output of the jobs that produced one since the previous report (the server-side time to first token); null when none did' })
  firstOutputMs: number | null;
  @Field(() => Float, { nullable: true, description: 'Mean ms from dispatch to completion of the jobs completed since the previous report; null when none did' })
  completionMs: number | null;
  @Field(() => Int, { description: 'Jobs completed since the previous report' })
  completed: number;
  @Field(() => Int, { nullable: true, description: 'Requests in the engine\'s running batch, as the engine reports it (vLLM, SGLang: their /metrics; built-in engines: their own state); null when the engine reports none' })
  engineRunning: number | null;
  @Field(() => Int, { nullable: true, description: 'Requests waiting in the engine\'s own queue (not the agent\'s: that is queued); null when the engine reports none' })
  engineWaiting: number | null;
  @Field(() => Float, { nullable: true, description: 'Fraction of the engine\'s KV cache in use, 0 to 1; null when the engine reports none' })
  kvCacheUsage: number | null;
  @Field(() => Float, { nullable: true, description: 'Fraction of prompt tokens the engine served from its prefix cache over the agent\'s last interval, 0 to 1; null when the engine reports none (yet)' })
  prefixCacheHitRate: number | null;
}
