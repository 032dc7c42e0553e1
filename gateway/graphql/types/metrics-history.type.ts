import { Field, Float, Int, ObjectType } from 'type-graphql';

@ObjectType('DeploymentMetricsPoint', {
  description: 'One step of a deployment\'s history: sums over its minutes (every server\'s), and percentiles of their requests together',
})
export class DeploymentMetricsPointType {
  @Field({ description: 'The first minute of the step' }) at: Date;
  @Field(() => Int, { description: 'Requests that ended in the step (guests\' on this deployment and batch lines included)' }) requests: number;
  @Field(() => Int, { description: 'Of those, the failed ones (a client that left is not an error)' }) errors: number;
  @Field(() => Float, { description: 'Prompt tokens' }) tokensIn: number;
  @Field(() => Float, { description: 'Completion tokens' }) tokensOut: number;
  @Field(() => Float, { nullable: true, description: 'Time to first token of streamed live requests, ms; null with none' }) ttftP50: number | null;
  @Field(() => Float, { nullable: true }) ttftP95: number | null;
  @Field(() => Float, { nullable: true }) ttftP99: number | null;
  @Field(() => Float, { nullable: true, description: 'End-to-end latency of live requests, ms; null with none' }) latencyP50: number | null;
  @Field(() => Float, { nullable: true }) latencyP95: number | null;
  @Field(() => Float, { nullable: true }) latencyP99: number | null;
  @Field(() => Int, { description: 'The most replicas running in any minute of the step' }) replicas: number;
  @Field(() => Float, { description: 'GPU time billed in the step, USD' }) gpuCostUsd: number;
}
