import { AppError } from '../errors/app-error';
import type { DeploymentStatus } from './deployment.entity';

/**
 * Legal deployment status changes (docs/api-contract.md#deployments leaves them out; docs/api-contract.md#deployment-states documents this table).
 * `Creating → Running` happens when the first replica's agent says Hello; resume goes back
 * through `Creating` because replicas are placed and started again.
 */
export const DEPLOYMENT_TRANSITIONS: Record<DeploymentStatus, readonly DeploymentStatus[]> = {
  Creating: ['Running', 'Paused', 'Deleted'],
  Running: ['Creating', 'Paused', 'Deleted'],
  Paused: ['Creating', 'Deleted'],
  Deleted: [],
};

export function assertTransition(from: DeploymentStatus, to: DeploymentStatus): void {
  if (!DEPLOYMENT_TRANSITIONS[from].includes(to)) {
    const allowed = DEPLOYMENT_TRANSITIONS[from];
    throw new AppError('invalid_state_transition',
      `a ${from} deployment cannot become ${to}` + (allowed.length ? ` (allowed: ${allowed.join(', ')})` : ' (it is final)'));
  }
}
