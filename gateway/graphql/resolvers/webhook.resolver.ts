import { Arg, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { AdminPort, WebhookAttempt } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import {
  CreateWebhookEndpointInput, UpdateWebhookEndpointInput, WebhookAttemptType, WebhookDeliveryType, WebhookEndpointType, WebhookSigningSecretType,
} from '../types/webhook.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';
import { servedBySubscriptionHub } from '../subscription-routes';

/** Endpoints, the signing secret, test sends and the delivery log (console operations: docs/api-contract.md#webhooks). */
@Resolver(() => WebhookDeliveryType)
export class WebhookResolver {
  constructor(private readonly admin: Pick<AdminPort, 'webhooks'>) {}

  private get webhooks() {
    return this.admin.webhooks.service;
  }

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [WebhookEndpointType])
  async webhookEndpoints(@Ctx() context: GraphQLContext): Promise<WebhookEndpointType[]> {
    return await this.webhooks.endpoints.list(workspaceOf(context));
  }

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [WebhookDeliveryType], { description: 'The delivery log, newest first' })
  async webhookDeliveries(
    @Ctx() context: GraphQLContext,
    @Arg('endpointId', () => ID, { nullable: true }) endpointId: string | null,
    @Arg('requestId', () => ID, { nullable: true }) requestId: string | null,
    @Arg('limit', () => Int, { defaultValue: 50 }) limit: number,
  ): Promise<WebhookDeliveryType[]> {
    const deliveries = await this.webhooks.listDeliveries(workspaceOf(context), { endpointId: endpointId ?? undefined, requestId: requestId ?? undefined, limit });
    return deliveries;
  }

  @Query(() => WebhookDeliveryType)
  async webhookDelivery(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<WebhookDeliveryType> {
    return await this.webhooks.delivery(workspaceOf(context), id);
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => [WebhookAttemptType], { description: 'Every attempt, in order' })
  async attemptLog(@Root() delivery: WebhookDeliveryType): Promise<WebhookAttemptType[]> {
    return await this.webhooks.attemptsOf(delivery.id);
  }

  @Query(() => WebhookSigningSecretType, { description: 'Reveals the workspace signing secret (created on first use)' })
  async webhookSigningSecret(@Ctx() context: GraphQLContext): Promise<WebhookSigningSecretType> {
    return await this.webhooks.revealSecret(workspaceOf(context));
  }

  @Mutation(() => WebhookSigningSecretType, { description: 'A new secret; the previous one keeps signing for graceSeconds (default 24 h)' })
  async rotateWebhookSigningSecret(
    @Ctx() context: GraphQLContext,
    @Arg('graceSeconds', () => Int, { nullable: true }) graceSeconds: number | null,
  ): Promise<WebhookSigningSecretType> {
    return await this.webhooks.rotateSecret(workspaceOf(context), graceSeconds ?? undefined);
  }

  @Mutation(() => WebhookEndpointType)
  async createWebhookEndpoint(@Arg('input') input: CreateWebhookEndpointInput, @Ctx() context: GraphQLContext): Promise<WebhookEndpointType> {
    return await this.webhooks.endpoints.create(workspaceOf(context), input.url, input.description);
  }

  @Mutation(() => WebhookEndpointType)
  async updateWebhookEndpoint(
    @Arg('id', () => ID) id: string, @Arg('input') input: UpdateWebhookEndpointInput, @Ctx() context: GraphQLContext,
  ): Promise<WebhookEndpointType> {
    return await this.webhooks.endpoints.update(workspaceOf(context), id, input);
  }

  @Mutation(() => WebhookEndpointType)
  async deleteWebhookEndpoint(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<WebhookEndpointType> {
    return await this.webhooks.endpoints.delete(workspaceOf(context), id);
  }

  @Mutation(() => WebhookDeliveryType, { description: 'Sends a webhook.test event to the endpoint (enabled or not); never counts toward auto-disable' })
  async sendTestWebhook(@Arg('endpointId', () => ID) endpointId: string, @Ctx() context: GraphQLContext): Promise<WebhookDeliveryType> {
    return await this.webhooks.sendTest(workspaceOf(context), endpointId);
  }

  @Subscription(() => WebhookAttemptType, {
    description: 'Every delivery attempt of the workspace, as it is logged',
    subscribe: servedBySubscriptionHub,
  })
  webhookDeliveryLogged(@Root() attempt: WebhookAttempt): WebhookAttemptType {
    return attempt;
  }
}
