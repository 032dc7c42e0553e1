import { type Client, createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { ServerError } from '../errors';
import { type Connection, graphql } from '../graphql-client';
import { type Output, printJsonLine } from '../output';
import { OPERATIONS } from '../operations';
import type { Deployment, ScalingDecision } from './deployment-fields';

/** Decisions read at each poll while following: more than the autoscaler records between two polls at any sane interval. */
const POLL_DECISIONS = 50;

export interface FollowOptions {
  id: string;
  follow: boolean;
  /** Scaling decisions printed first. */
  limit: number;
  /** How often scaling decisions (which come with no event) and the deployment are read while following. */
  intervalMs: number;
}

/**
 * `deployment events <id> [--follow]`: the latest scaling decisions (oldest first) and the
 * deployment's state; with --follow, every update of it the `deploymentUpdated` subscription
 * (graphql-ws) brings, and each new scaling decision (`scalingDecisions`, read every
 * `intervalMs`: a decision is no event). The poll also prints a state the subscription missed
 * (a reconnect), so nothing is lost between the first read and the subscription. Ends at
 * SIGINT/SIGTERM (resolves: exit 0), when the deployment is deleted, or at an error the server
 * sends (rejects with it: exit 1).
 */
export async function followEvents(connection: Connection, output: Output, options: FollowOptions): Promise<void> {
  const printer = new EventPrinter(output, options.id);
  if (!options.follow) {
    const { deployment } = await graphql<{ deployment: Deployment & { scalingDecisions: ScalingDecision[] } }>(connection, OPERATIONS.deploymentEvents, { id: options.id, limit: options.limit });
    printer.decisions(deployment.scalingDecisions);
    printer.deployment(deployment);
    return;
  }

  let client: Client | undefined;
  let timer: NodeJS.Timeout | undefined;
  let done = false;
  let finish!: (error?: unknown) => void;
  const finished = new Promise<void>((resolve, reject) => {
    finish = (error) => {
      done = true;
      if (error === undefined) resolve();
      else reject(error);
    };
  });
  const onSignal = () => finish();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // Subscribed before the first read, so an update between the two is not lost.
    client = createClient({
      url: `${connection.url.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${connection.token}` },
      retryAttempts: 5,
    });
    const connected = new Promise<void>((resolve) => client!.on('connected', () => resolve()));
    client.subscribe<{ deploymentUpdated: Deployment }>({ query: OPERATIONS.deploymentUpdated }, {
      next: (event) => {
        const updated = event.data?.deploymentUpdated;
        if (!updated || updated.id !== options.id) return;
        printer.deployment(updated);
        if (updated.status === 'Deleted') finish();
      },
      error: (error) => finish(subscriptionError(error)),
      complete: () => finish(new ServerError('SUBSCRIPTION_ENDED', 'the server ended the deploymentUpdated subscription')),
    });
    await Promise.race([connected, finished]);

    const poll = async (limit: number) => {
      const { deployment } = await graphql<{ deployment: Deployment & { scalingDecisions: ScalingDecision[] } }>(connection, OPERATIONS.deploymentEvents, { id: options.id, limit });
      const { scalingDecisions, ...rest } = deployment;
      printer.decisions(scalingDecisions);
      printer.deployment(rest);
      if (deployment.status === 'Deleted') finish();
    };
    const schedule = () => {
      if (done) return;
      timer = setTimeout(() => poll(POLL_DECISIONS).then(schedule, finish), options.intervalMs);
    };
    await Promise.race([poll(options.limit).then(schedule), finished]);
    await finished;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    clearTimeout(timer);
    await client?.dispose();
  }
}

/** graphql-ws reports a failed subscription as GraphQL errors, a CloseEvent or an Error. */
function subscriptionError(error: unknown): ServerError {
  if (Array.isArray(error) && error.length > 0) {
    const [first] = error as Array<{ message?: string; extensions?: { code?: string; param?: string } }>;
    return new ServerError(first.extensions?.code ?? 'SUBSCRIPTION_FAILED', first.message ?? 'the subscription failed', first.extensions?.param);
  }
  const close = error as { code?: unknown; reason?: unknown };
  if (typeof close?.code === 'number') {
    return new ServerError(`CLOSED_${close.code}`, `the server closed the subscription's socket${close.reason ? `: ${String(close.reason)}` : ''}`);
  }
  const cause = (error as { code?: string; message?: string });
  return new ServerError(cause?.code ?? 'SUBSCRIPTION_FAILED', cause?.message ?? String(error));
}

/** Prints each decision once (oldest first) and each state of the deployment once, as lines or NDJSON. */
class EventPrinter {
  private lastDecidedAt = -Infinity;
  private lastState: string | undefined;

  constructor(private readonly output: Output, private readonly id: string) {}

  /** Decisions newest first, as `scalingDecisions` lists them; prints those newer than any printed. */
  decisions(decisions: ScalingDecision[]): void {
    const fresh = decisions.filter((decision) => Date.parse(decision.decidedAt) > this.lastDecidedAt).reverse();
    for (const decision of fresh) {
      this.lastDecidedAt = Date.parse(decision.decidedAt);
      if (this.output.json) {
        printJsonLine(this.output, { event: 'scalingDecision', deploymentId: this.id, decision });
      } else {
        this.output.write(`${decision.decidedAt}  decision  ${decision.action} (${decision.reason}) replicas ${decision.currentReplicas}->${decision.desiredReplicas}`
          + ` signal ${decision.signal}: ${decision.explanation}\n`);
      }
    }
  }

  /** Prints the deployment when what is shown of it changed since the last line. */
  deployment(deployment: Deployment): void {
    const { status, statusReason, minReplicas, maxReplicas, desiredReplicas, autoscale, priceCapPerHour, routingPolicy } = deployment;
    const state = JSON.stringify([status, statusReason, minReplicas, maxReplicas, desiredReplicas, autoscale, priceCapPerHour, routingPolicy]);
    if (state === this.lastState) return;
    this.lastState = state;
    if (this.output.json) {
      printJsonLine(this.output, { event: 'deployment', deployment });
      return;
    }
    this.output.write(`${deployment.updatedAt}  update    ${deployment.id} ${status}${statusReason ? ` (${statusReason})` : ''}`
      + ` replicas ${desiredReplicas} desired, min ${minReplicas}, max ${maxReplicas}${autoscale ? ', autoscale' : ''}\n`);
  }
}
