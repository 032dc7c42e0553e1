import type { ControlPlaneEventMap } from '../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from './graphql-context';

/**
 * Where each subscription field's events come from and who they go to. An event is delivered
 * on the channels it names, and a subscription listens on one channel, chosen (and checked)
 * when it starts: an event reaches only the subscriptions of its own channel, never the
 * others on the server. Every channel of a workspace's records starts with the workspace id
 * the event itself carries, so one workspace's events cannot reach another's subscriptions
 * whatever the arguments say (the filters that used to check it ran once per subscription per
 * event: each heartbeat touched all 40,000 subscriptions of a server, issue 33).
 */
export type SubscriptionRoute = EventRoute | StreamRoute;

/** A subscription that follows a control-plane event: rendered once per event for all its subscribers (subscription-hub.ts). */
export interface EventRoute {
  /** The control-plane event it follows. */
  readonly event: keyof ControlPlaneEventMap;
  /** The channels an event goes out on. */
  channelsOf(event: never): readonly string[];
  /**
   * The channel a subscription with these arguments listens on, once the caller may: throws the
   * refusal (a key is needed; another workspace's deployment is FORBIDDEN, an unknown one
   * NOT_FOUND, as the queries answer).
   */
  channelFor(args: Record<string, unknown>, caller: GraphQLContext): Promise<string>;
}

/**
 * A subscription that is its own piece of work, not a view of shared events (the playground's
 * chat: one request, streamed): `stream` checks the caller and arguments (throwing the refusal,
 * as a query would) and returns what the subscription yields, in order, each rendered with the
 * operation's own selection; it ends when the work does, or is ended (`return`) when the client
 * completes or goes away.
 */
export interface StreamRoute {
  stream(args: Record<string, unknown>, caller: GraphQLContext): Promise<AsyncIterator<unknown>>;
}

/** Streams each served by the resolver that owns it. */
export type SubscriptionStreams = Readonly<Record<string, StreamRoute>>;

/** The checks a subscription's arguments need (resolvers own them: the same refusals as their queries). */
export interface SubscriptionChecks {
  /** `replicaLoad(deploymentId)` and `replicaLogLine(deploymentId)`: the caller's own deployment. */
  ownDeployment(caller: GraphQLContext, deploymentId: string): Promise<void>;
  /** `batchUpdated(deploymentId)`: no deployment, or the caller's own. */
  ownBatchDeployment(caller: GraphQLContext, deploymentId: string | null | undefined): Promise<void>;
}

interface OfWorkspace {
  readonly workspaceId: string;
}
interface OfDeployment extends OfWorkspace {
  readonly deploymentId: string;
}

const ofWorkspace = (event: OfWorkspace) => [event.workspaceId];
const inWorkspace = async (_args: Record<string, unknown>, caller: GraphQLContext) => workspaceOf(caller);

/** The route of every subscription field of the schema, by field name. */
export function subscriptionRoutes(checks: SubscriptionChecks, streams: SubscriptionStreams = {}): Readonly<Record<string, SubscriptionRoute>> {
  return {
    ...streams,
    replicaLoad: {
      event: 'replicaLoad',
      channelsOf: (load: OfDeployment) => [`${load.workspaceId}/${load.deploymentId}`],
      async channelFor(args, caller) {
        const deploymentId = String(args.deploymentId);
        await checks.ownDeployment(caller, deploymentId);
        return `${workspaceOf(caller)}/${deploymentId}`;
      },
    },
    replicaLogLine: {
      event: 'replicaLogLine',
      channelsOf: (line: OfDeployment) => [`${line.workspaceId}/${line.deploymentId}`],
      async channelFor(args, caller) {
        const deploymentId = String(args.deploymentId);
        await checks.ownDeployment(caller, deploymentId);
        return `${workspaceOf(caller)}/${deploymentId}`;
      },
    },
    deploymentUpdated: { event: 'deploymentUpdated', channelsOf: ofWorkspace, channelFor: inWorkspace },
    adapterUpdated: { event: 'adapterUpdated', channelsOf: ofWorkspace, channelFor: inWorkspace },
    requestUpdated: { event: 'requestUpdated', channelsOf: ofWorkspace, channelFor: inWorkspace },
    webhookDeliveryLogged: { event: 'webhookAttemptLogged', channelsOf: ofWorkspace, channelFor: inWorkspace },
    batchUpdated: {
      event: 'batchUpdated',
      // Subscribed without a deployment: every batch of the workspace; with one: that deployment's.
      channelsOf: (batch: OfDeployment) => [batch.workspaceId, `${batch.workspaceId}/${batch.deploymentId}`],
      async channelFor(args, caller) {
        const deploymentId = args.deploymentId as string | null | undefined;
        await checks.ownBatchDeployment(caller, deploymentId);
        const workspaceId = workspaceOf(caller);
        return deploymentId ? `${workspaceId}/${deploymentId}` : workspaceId;
      },
    },
    // Shared models carry no tenant's data: every key may follow them (not the operator, who has no workspace).
    sharedModelUpdated: {
      event: 'sharedModelUpdated',
      channelsOf: () => ['shared'],
      async channelFor(_args, caller) {
        workspaceOf(caller);
        return 'shared';
      },
    },
  };
}

/**
 * The `subscribe` of every @Subscription field: the server's SubscriptionHub puts its own in
 * its place (subscription-hub.ts), so a schema without one (the printed schema) serves none.
 */
export function servedBySubscriptionHub(): never {
  throw new Error('subscriptions are served by the gateway\'s subscription hub');
}
