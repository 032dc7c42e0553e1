import { Field, Float, ID, InputType, Int, ObjectType } from 'type-graphql';

@InputType({ description: 'One message of a playground conversation' })
export class PlaygroundMessageInput {
  @Field({ description: 'system, user, assistant or tool' }) role: string;
  @Field(() => String, { nullable: true }) content?: string | null;
  @Field(() => String, { nullable: true, description: 'tool messages: the id of the tool call this answers' }) toolCallId?: string | null;
  @Field(() => String, { nullable: true, description: 'assistant messages: the tool calls it made, as the JSON array the answer gave' }) toolCalls?: string | null;
}

@InputType({ description: 'A chat request of the console\'s playground, run as one of the workspace\'s API keys' })
export class PlaygroundChatInput {
  @Field(() => ID, { description: 'A chat deployment of the workspace' }) deploymentId: string;
  @Field(() => ID, { description: 'The API key the request runs as (not revoked): it is admitted, rate-limited, billed and logged as that key' }) apiKeyId: string;
  @Field(() => [PlaygroundMessageInput]) messages: PlaygroundMessageInput[];
  @Field(() => String, { nullable: true, description: 'The base model (the default) or the name of a LoRA adapter attached to the deployment, as `model` on /v1' })
  model?: string | null;
  @Field(() => String, { nullable: true, description: 'JSON: the tools array as the Chat Completions API takes it ([{"type": "function", "function": {"name", "description", "parameters"}}])' })
  tools?: string | null;
  @Field(() => String, { nullable: true, description: 'auto, none, required, or JSON naming a function ({"type": "function", "function": {"name": ...}})' })
  toolChoice?: string | null;
  @Field(() => String, { nullable: true, description: 'JSON: a JSON Schema the answer must follow (sent as response_format {"type": "json_schema"})' })
  responseSchema?: string | null;
  @Field(() => Int, { nullable: true }) maxTokens?: number | null;
  @Field(() => Float, { nullable: true }) temperature?: number | null;
}

@ObjectType('PlaygroundChatEvent', { description: 'A piece of a streamed playground answer: text as it comes, then the end with tool calls, finish reason and tokens' })
export class PlaygroundChatEventType {
  @Field({ description: 'The request id (as x-request-id on /v1), in the request log and usage records' }) requestId: string;
  @Field({ description: 'Text added by this piece (empty at the end)' }) content: string;
  @Field({ description: 'The last piece of the answer' }) done: boolean;
  @Field(() => String, { nullable: true, description: 'At the end: stop, length, tool_calls, …' }) finishReason: string | null;
  @Field(() => String, { nullable: true, description: 'At the end, when the model called tools: the tool calls as JSON ([{"id", "type", "function": {"name", "arguments"}}])' })
  toolCalls: string | null;
  @Field(() => Int, { nullable: true, description: 'At the end' }) promptTokens: number | null;
  @Field(() => Int, { nullable: true, description: 'At the end' }) completionTokens: number | null;
}

@InputType({ description: 'An image generation of the console\'s playground, run as one of the workspace\'s API keys' })
export class PlaygroundImageInput {
  @Field(() => ID, { description: 'An image deployment of the workspace' }) deploymentId: string;
  @Field(() => ID, { description: 'The API key the request runs as (not revoked)' }) apiKeyId: string;
  @Field() prompt: string;
  @Field(() => String, { nullable: true, description: 'WIDTHxHEIGHT, one of the model\'s sizes; default 1024x1024 when offered, else its first' }) size?: string | null;
}

@ObjectType('PlaygroundImage', { description: 'A generated image: its request and signed links to its outputs' })
export class PlaygroundImageType {
  @Field(() => ID, { description: 'The request record (Requests page)' }) requestId: string;
  @Field(() => [String], { description: 'Signed links to the images, valid for the storage\'s link lifetime' }) urls: string[];
}
