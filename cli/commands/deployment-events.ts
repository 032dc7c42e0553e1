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
 * `intervalMs`: a decision is no event). Those reads also print a state the subscription
 * missed (before it was subscribed, or while its socket was dialled again). Ends at
 * SIGINT/SIGTERM (resolves: exit 0), when the deployment is deleted, or at an error the server
 * sends (rejects with it: exit 1).
 */
export async function followEvents(connection: Connection, output: Output, options: FollowOptions): Promise<void> {
  const printer = new EventPrinter(output, options.id);
  /** Reads the deployment and its latest decisions, prints what is new; returns its status. */
  const read = async (limit: number): Promise<string> => {
    const { deployment } = await graphql<{ deployment: Deployment & { scalingDecisions: ScalingDecision[] } }>(
      connection, OPERATIONS.deploymentEvents, { id: options.id, limit });
    const { scalingDecisions, ...rest } = deployment;
    printer.decisions(scalingDecisions);
    printer.deployment(rest);
    return deployment.status;
  };
  // The first read fails with the server's own error (a bad key, an unknown id) before any socket is opened.
  const status = await read(options.limit);
  if (!options.follow || status === 'Deleted') return;

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
    client = createClient({
      url: `${connection.url.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${connection.token}` },
      // A lost socket is dialled again (0.5, 1, 2, 4, 5 s); a refusal (4400–4499: a key revoked, a budget spent) ends the follow.
      retryAttempts: 5,
      retryWait: async (retries) => await new Promise((resolve) => setTimeout(resolve, Math.min(500 * 2 ** retries, 5_000))),
      shouldRetry: (event) => !refused(event),
    });
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
    // The reads also print a state the subscription missed: before it was subscribed, or while its socket was dialled again.
    const schedule = () => {
      if (done) return;
      timer = setTimeout(() => read(POLL_DECISIONS).then((now) => (now === 'Deleted' ? finish() : schedule()), finish), options.intervalMs);
    };
    schedule();
    await finished;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    clearTimeout(timer);
    await client?.dispose();
  }
}

/** A close the server sent to refuse the socket (4400–4499), which dialling again would not change. */
function refused(event: unknown): boolean {
  const code = (event as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code >= 4400 && code < 4500;
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
