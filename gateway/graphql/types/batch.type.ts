import { GraphQLJSONObject, GraphQLSafeInt } from 'graphql-scalars';
import { Field, ID, Int, ObjectType } from 'type-graphql';

@ObjectType('BatchRequestCounts', { description: "A batch's lines (requests): all of them, and those answered so far" })
export class BatchRequestCountsType {
  @Field(() => Int, { description: 'Lines in the input file (0 while validating)' }) total: number;
  @Field(() => Int, { description: 'Lines answered with a 2xx: their answers are in the output file' }) completed: number;
  @Field(() => Int, { description: 'Lines answered with a 4xx/5xx or never answered (expired, cancelled, replica lost): they are in the error file' }) failed: number;
}

@ObjectType('BatchUsage', { description: 'Tokens of the batch\'s lines so far (they cost nothing beyond the deployment\'s GPU-hours; they count toward the key\'s TPD)' })
export class BatchUsageType {
  @Field(() => GraphQLSafeInt) inputTokens: number;
  @Field(() => GraphQLSafeInt, { description: 'Input tokens served from the prefix cache' }) cachedTokens: number;
  @Field(() => GraphQLSafeInt) outputTokens: number;
  @Field(() => GraphQLSafeInt) totalTokens: number;
}

@ObjectType('BatchError', { description: 'Why a batch\'s input file was refused (status failed): one problem, with the line it is on' })
export class BatchErrorType {
  @Field() code: string;
  @Field() message: string;
  @Field(() => String, { nullable: true }) param: string | null;
  @Field(() => Int, { nullable: true, description: 'The input file\'s line, counted from 1' }) line: number | null;
}

@ObjectType('Batch', { description: 'A batch of the OpenAI Batch API on a deployment endpoint (POST {baseUrl}/batches): its lines run in the capacity live requests leave free' })
export class BatchType {
  @Field(() => ID, { description: 'batch_…' }) id: string;
  @Field(() => ID) deploymentId: string;
  @Field({ description: '/v1/chat/completions, /v1/completions or /v1/embeddings' }) endpoint: string;
  @Field({ description: 'The deployment\'s model when the batch was created' }) model: string;
  @Field({
    description: 'validating, in_progress, finalizing, completed; failed (an invalid input file: see errors); expired (the completion window passed); cancelling, cancelled',
  }) status: string;
  @Field({ description: 'OpenAI\'s completion_window: 24h' }) completionWindow: string;
  @Field(() => ID, { description: 'file-…: the uploaded JSONL of requests' }) inputFileId: string;
  @Field(() => ID, { nullable: true, description: 'file-…: the answers, once the batch ended with at least one' }) outputFileId: string | null;
  @Field(() => ID, { nullable: true, description: 'file-…: the lines that failed, once the batch ended with at least one' }) errorFileId: string | null;
  @Field(() => BatchRequestCountsType) requestCounts: BatchRequestCountsType;
  @Field(() => BatchUsageType) usage: BatchUsageType;
  @Field(() => [BatchErrorType], { nullable: true, description: 'Why validation failed (status failed); null otherwise' }) errors: BatchErrorType[] | null;
  @Field(() => GraphQLJSONObject, { nullable: true, description: 'The string pairs given at creation' }) metadata: Record<string, string> | null;
  @Field() createdAt: Date;
  @Field({ description: 'When the completion window ends: lines not answered by then go to the error file and the batch ends expired' }) expiresAt: Date;
  @Field(() => Date, { nullable: true }) inProgressAt: Date | null;
  @Field(() => Date, { nullable: true }) finalizingAt: Date | null;
  @Field(() => Date, { nullable: true }) completedAt: Date | null;
  @Field(() => Date, { nullable: true }) failedAt: Date | null;
  @Field(() => Date, { nullable: true }) expiredAt: Date | null;
  @Field(() => Date, { nullable: true }) cancellingAt: Date | null;
  @Field(() => Date, { nullable: true }) cancelledAt: Date | null;
}
