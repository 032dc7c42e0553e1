import { useEffect } from 'react';
import { useQuery } from 'urql';
import { graphql } from '../gql';

// Waiting requests change with no deployment change to push (only the first one wakes the
// autoscaler), so the count is re-read while the deployment has no running replica.
const WAITING = graphql(`
  query WaitingForReplica($id: ID!) { deployment(id: $id) { id waitingForReplica } }
`);

/** How often the count is re-read at zero or during a cold start. */
const POLL_MS = 1_000;

/**
 * A Running deployment that scales to zero, while it has no running replica: "Scaled to zero" when idle,
 * "Starting: N requests waiting" while requests wait at the gateways for a first replica
 * (docs/autoscaling.md#scale-to-zero). Nothing otherwise.
 */
export function ColdStartStatus({ deploymentId, status, scalesToZero, running, desiredReplicas, waiting }: {
  deploymentId: string; status: string; scalesToZero: boolean; running: boolean; desiredReplicas: number; waiting: number;
}) {
  // A deployment at zero stays Running (a paused one has no replicas for another reason).
  const watching = status === 'Running' && scalesToZero && !running;
  const [{ data }, refetch] = useQuery({ query: WAITING, variables: { id: deploymentId }, pause: !watching, requestPolicy: 'network-only' });
  useEffect(() => {
    if (!watching) return;
    const timer = setInterval(() => refetch({ requestPolicy: 'network-only' }), POLL_MS);
    return () => clearInterval(timer);
  }, [watching, refetch]);
  if (!watching) return null;
  const now = data?.deployment.waitingForReplica ?? waiting;
  const text = now > 0
    ? `Starting: ${now === 1 ? '1 request' : `${now} requests`} waiting for a replica`
    : desiredReplicas === 0 ? 'Scaled to zero: the next request starts a replica; nothing is billed meanwhile' : 'Starting a replica';
  return <p className="notice" role="status" data-testid="cold-start-status">{text}</p>;
}
