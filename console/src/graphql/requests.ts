import { useCallback } from 'react';
import { useClient, useMutation, type CombinedError } from 'urql';
import { graphql } from '../gql';

const CANCEL_REQUEST = graphql(`
  mutation CancelRequest($id: ID!) {
    cancelRequest(id: $id) { id status progress completedAt }
  }
`);

const OUTPUT_URLS = graphql(`
  query RequestOutputUrls($id: ID!) {
    request(id: $id) { id outputUrls }
  }
`);

/** Cancels a queued request (`cancelRequest`); resolves with the API's error, or null. */
export function useCancelRequest(): (id: string) => Promise<CombinedError | null> {
  const [, cancel] = useMutation(CANCEL_REQUEST);
  return useCallback(async (id: string) => (await cancel({ id }, { additionalTypenames: ['Request'] })).error ?? null, [cancel]);
}

/** Links to a succeeded request's outputs, signed anew by the server at each call (never cached here). */
export function useOutputUrls(): (id: string) => Promise<{ urls: string[] } | { error: CombinedError }> {
  const client = useClient();
  return useCallback(async (id: string) => {
    const result = await client.query(OUTPUT_URLS, { id }, { requestPolicy: 'network-only' }).toPromise();
    return result.error ? { error: result.error } : { urls: result.data?.request.outputUrls ?? [] };
  }, [client]);
}
