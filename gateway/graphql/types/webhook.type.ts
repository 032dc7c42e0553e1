import { Field, ID, InputType, Int, ObjectType } from 'type-graphql';

@ObjectType('WebhookEndpoint', { description: 'A URL that receives every request event of the workspace' })
export class WebhookEndpointType {
  @Field(() => ID) id: string;
  @Field() url: string;
  @Field() description: string;
  @Field() enabled: boolean;
  @Field(() => String, { nullable: true, description: 'Why it is disabled: by a user, or automatically after consecutive failed deliveries' })
  disabledReason: string | null;
  @Field(() => Int, { description: 'Deliveries that failed in a row (test sends never count)' }) consecutiveFailures: number;
  @Field() createdAt: Date;
}

@InputType()
export class CreateWebhookEndpointInput {
  @Field({ description: 'Public HTTPS URL' }) url: string;
  @Field({ defaultValue: '' }) description: string;
}

@InputType()
export class UpdateWebhookEndpointInput {
  @Field({ nullable: true }) url?: string;
  @Field({ nullable: true }) description?: string;
  @Field({ nullable: true, description: 'false disables; true re-enables and clears the failure count' }) enabled?: boolean;
}

@ObjectType('WebhookAttempt', { description: 'One attempt of a delivery: what was sent and what came back' })
export class WebhookAttemptType {
  @Field(() => ID) id: string;
  @Field(() => ID) deliveryId: string;
  @Field(() => Int) attempt: number;
  @Field() url: string;
  @Field(() => Int, { nullable: true, description: 'The receiver\'s HTTP status; null when there was no answer' }) statusCode: number | null;
  @Field(() => String, { nullable: true }) error: string | null;
  @Field(() => Int) latencyMs: number;
  @Field() succeeded: boolean;
  @Field({ description: 'The exact body sent' }) requestBody: string;
  @Field({ description: 'The X-Service-Signature header sent' }) signature: string;
  @Field() createdAt: Date;
}

@ObjectType('WebhookDelivery', { description: 'One event to one URL, retried up to the attempt limit' })
export class WebhookDeliveryType {
  @Field(() => ID) id: string;
  @Field(() => ID) eventId: string;
  @Field({ description: 'request.completed, request.failed, request.canceled, batch.completed, batch.failed, batch.expired, batch.cancelled, response.completed, response.incomplete, response.failed, response.cancelled or webhook.test' }) eventType: string;
  @Field({ description: 'request_url (the request\'s webhook_url), endpoint, or test' }) target: string;
  @Field(() => ID, { nullable: true }) endpointId: string | null;
  @Field() url: string;
  @Field({ description: 'pending, delivering, succeeded or failed' }) status: string;
  @Field(() => Int) attempts: number;
  @Field() nextAttemptAt: Date;
  @Field(() => Int, { nullable: true }) lastStatusCode: number | null;
  @Field(() => String, { nullable: true }) lastError: string | null;
  @Field() createdAt: Date;
  @Field(() => Date, { nullable: true }) completedAt: Date | null;
}

@ObjectType('WebhookSigningSecret', { description: 'The workspace secret webhook signatures are made with' })
export class WebhookSigningSecretType {
  @Field() secret: string;
  @Field() rotatedAt: Date;
  @Field(() => Date, { nullable: true, description: 'Until then deliveries also carry a signature made with the previous secret' })
  previousExpiresAt: Date | null;
}
