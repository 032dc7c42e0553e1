import { useCallback } from 'react';
import { useMutation, type CombinedError } from 'urql';
import { graphql } from '../gql';

const CANCEL_BATCH = graphql(`
  mutation CancelBatch($id: ID!) {
    cancelBatch(id: $id) { id status cancellingAt cancelledAt requestCounts { total completed failed } }
  }
`);

/** Cancels a validating or in-progress batch (`cancelBatch`); resolves with the API's error, or null. */
export function useCancelBatch(): (id: string) => Promise<CombinedError | null> {
  const [, cancel] = useMutation(CANCEL_BATCH);
  return useCallback(async (id: string) => (await cancel({ id }, { additionalTypenames: ['Batch'] })).error ?? null, [cancel]);
}

/** Statuses in which a batch still takes lines, so cancelling it changes something. */
export const CANCELLABLE = ['validating', 'in_progress'];

const STAGE: Record<string, number> = { validating: 0, in_progress: 1, finalizing: 2, cancelling: 2 };
/** validating → in_progress → finalizing | cancelling → an end (failed, completed, expired, cancelled). */
const stage = (status: string) => STAGE[status] ?? 3;

/** Whether `a` is at least as far along as `b`: a batch's status only moves forward and its counts only grow. */
export function newerBatch(
  a: { status: string; requestCounts: { completed: number; failed: number } },
  b: { status: string; requestCounts: { completed: number; failed: number } },
): boolean {
  const done = (batch: typeof a) => batch.requestCounts.completed + batch.requestCounts.failed;
  return stage(a.status) > stage(b.status) || (stage(a.status) === stage(b.status) && done(a) >= done(b));
}
