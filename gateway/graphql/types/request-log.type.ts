import { Field, Float, ID, InputType, Int, ObjectType } from 'type-graphql';

@ObjectType('RequestPhases', { description: 'When each step of a request happened, ms after it arrived; null where it never reached the step' })
export class RequestPhasesType {
  @Field(() => Float, { nullable: true, description: 'Admission done (credit, rate limits)' }) admittedMs?: number | null;
  @Field(() => Float, { nullable: true, description: 'A replica chosen and the job sent' }) dispatchedMs?: number | null;
  @Field(() => Float, { nullable: true, description: 'The agent began running it' }) startedMs?: number | null;
  @Field(() => Float, { nullable: true, description: 'Its first byte reached the client (streams)' }) firstTokenMs?: number | null;
  @Field(() => Float, { nullable: true, description: 'Settled' }) endedMs?: number | null;
}

@ObjectType('RequestLogBody', { description: 'A request\'s stored bodies (only where the workspace stores them), each cut to the server\'s cap' })
export class RequestLogBodyType {
  @Field({ description: 'The client\'s body' }) request: string;
  @Field() requestTruncated: boolean;
  @Field(() => String, { nullable: true, description: 'The answer as sent (a stream\'s SSE lines); null where answers are not stored (embeddings)' }) response: string | null;
  @Field() responseTruncated: boolean;
}

@ObjectType('RequestLogEntry', { description: 'One text request (chat, completions, responses, embeddings, a batch line) of the workspace' })
export class RequestLogEntryType {
  @Field(() => ID, { description: 'The request id (x-request-id), or log_<n> for a batch line' }) id: string;
  @Field(() => String, { nullable: true }) requestId: string | null;
  @Field({ description: 'When it arrived' }) startedAt: Date;
  @Field(() => ID) apiKeyId: string;
  @Field(() => String, { nullable: true }) apiKeyName: string | null;
  @Field(() => ID, { nullable: true, description: 'The deployment that served it; null on a guest\'s request (see sharedModel)' }) deploymentId: string | null;
  @Field(() => String, { nullable: true }) deploymentSlug: string | null;
  @Field(() => String, { nullable: true, description: 'A guest\'s shared/<model-id>' }) sharedModel: string | null;
  @Field(() => String, { nullable: true, description: 'The replica that ran it (never on a guest\'s request)' }) replicaId: string | null;
  @Field(() => String, { nullable: true, description: 'The batch of a batch line' }) batchId: string | null;
  @Field(() => String, { nullable: true, description: 'The LoRA adapter the request addressed (docs/adapters.md); null for the base model' }) adapterId: string | null;
  @Field(() => String, { nullable: true, description: 'The adapter\'s name as the client sent it in model' }) adapterName: string | null;
  @Field() model: string;
  @Field({ description: 'chat.completions, completions, responses or embeddings' }) endpoint: string;
  @Field() stream: boolean;
  @Field({ description: 'succeeded, failed or canceled' }) status: string;
  @Field(() => String, { nullable: true }) errorCode: string | null;
  @Field(() => String, { nullable: true }) finishReason: string | null;
  @Field(() => Int) promptTokens: number;
  @Field(() => Int) completionTokens: number;
  @Field(() => Int) cachedTokens: number;
  @Field(() => Float) latencyMs: number;
  @Field(() => Float, { nullable: true, description: 'Streams: time to the first byte' }) ttftMs: number | null;
  @Field(() => String, { nullable: true, description: 'The W3C trace id, when tracing was on' }) traceId: string | null;
  @Field(() => RequestPhasesType, { nullable: true }) phases: RequestPhasesType | null;
  @Field({ description: 'Whether bodies were stored for it (read them with `body`)' }) hasBody: boolean;
}

@ObjectType('RequestLogPage')
export class RequestLogPageType {
  @Field(() => [RequestLogEntryType], { description: 'Newest first' }) entries: RequestLogEntryType[];
  @Field(() => String, { nullable: true, description: 'Pass as `after` for the next (older) page; null on the last' }) nextCursor: string | null;
}

@InputType('RequestLogFilter')
export class RequestLogFilterInput {
  @Field(() => ID, { nullable: true }) deploymentId?: string | null;
  @Field(() => ID, { nullable: true }) apiKeyId?: string | null;
  @Field(() => String, { nullable: true, description: 'A catalog model id, or shared/<model-id>' }) model?: string | null;
  @Field(() => String, { nullable: true, description: 'succeeded, failed or canceled' }) status?: string | null;
  @Field(() => String, { nullable: true }) finishReason?: string | null;
  @Field(() => Date, { nullable: true, description: 'Arrived at or after' }) from?: Date | null;
  @Field(() => Date, { nullable: true, description: 'Arrived before' }) to?: Date | null;
  @Field(() => String, { nullable: true, description: 'A request id or a trace id, exactly' }) search?: string | null;
}
