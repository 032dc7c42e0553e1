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

@ObjectType('AutoscalingPoint', {
  description: 'One step (a minute by default) of a deployment\'s autoscaling: SLO attainment, arrivals against the forecast, replicas, and cost against fixed-max',
})
export class AutoscalingPointType {
  @Field({ description: 'The step\'s first minute' }) at: Date;
  @Field(() => Int, { description: 'Requests that ended in the step (guests\' and batch lines included)' }) requests: number;
  @Field(() => Int, { description: 'Requests judged against the SLO: streamed owner text requests by TTFT (when they end), media jobs by queue wait (when they start)' })
  sloRequests: number;
  @Field(() => Int, { description: 'Of those, the ones within the SLO\'s target' }) withinSlo: number;
  @Field(() => Float, { nullable: true, description: 'withinSlo / sloRequests, 0 to 1; null with no request judged (none, or no SLO stated)' }) attainment: number | null;
  @Field(() => Float, { description: 'Owner requests that arrived in the step, per second, over every server' }) arrivalsPerSecond: number;
  @Field(() => Float, { nullable: true, description: 'The arrival rate the autoscaler forecast (mean of the step\'s recorded decisions); null when its policy does not forecast' })
  forecastArrivalsPerSecond: number | null;
  @Field(() => Int, { description: 'The most replicas running in any minute of the step' }) replicas: number;
  @Field(() => Float, { description: 'GPU time billed in the step, USD' }) gpuCost: number;
  @Field(() => Float, { description: 'What maxReplicas would have cost in the step at the range\'s mean price per replica-minute, USD (nothing for minutes before the deployment existed)' })
  fixedMaxCost: number;
}
