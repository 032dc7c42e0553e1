import { useCallback, useEffect, useRef } from 'react';

/**
 * Asks for a fresh read of a query once it is idle (`busy`: urql's `fetching || stale`). urql
 * drops a re-execution while the same query is in flight, so a change seen meanwhile (a
 * subscription event, a mutation that just committed) would be answered by the older read and
 * lost until the next event. A burst of asks makes one read, shortly after the last.
 */
export function useRefetchWhenIdle(busy: boolean, refetch: (options: { requestPolicy: 'network-only' }) => void): () => void {
  const busyNow = useRef(busy);
  busyNow.current = busy;
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    clearTimeout(timer.current);
    const attempt = () => {
      if (busyNow.current) timer.current = setTimeout(attempt, 100);
      else refetch({ requestPolicy: 'network-only' });
    };
    timer.current = setTimeout(attempt, 100);
  }, [refetch]);
}
