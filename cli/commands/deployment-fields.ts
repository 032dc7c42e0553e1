import { table } from '../output';

/** What the deployment commands read (operations.ts's DEPLOYMENT_FIELDS and scaling decisions), and how decisions print. */
export interface Deployment {
  id: string;
  slug: string;
  modelId: string;
  status: string;
  statusReason: string | null;
  provider: string;
  minReplicas: number;
  maxReplicas: number;
  desiredReplicas: number;
  autoscale: boolean;
  priceCapPerHour: number;
  routingPolicy: string;
  baseUrl: string;
  createdAt: string;
  updatedAt: string;
}

export interface ScalingDecision {
  decidedAt: string;
  action: string;
  reason: string;
  explanation: string;
  signal: number;
  targetConcurrency: number;
  currentReplicas: number;
  wantedReplicas: number;
  desiredReplicas: number;
}

export function decisionTable(decisions: ScalingDecision[]): string {
  return table(decisions, [
    { header: 'decided', value: (row) => row.decidedAt },
    { header: 'action', value: (row) => row.action },
    { header: 'reason', value: (row) => row.reason },
    { header: 'replicas', value: (row) => `${row.currentReplicas}->${row.desiredReplicas}` },
    { header: 'signal', value: (row) => row.signal },
    { header: 'explanation', value: (row) => row.explanation },
  ]);
}
