import { cacheExchange, Client, fetchExchange, subscriptionExchange } from 'urql';
import { createClient as createWsClient } from 'graphql-ws';

/** The console's only way to the server: this origin's /graphql, over HTTP and graphql-ws, with the workspace key. */
export function createGraphQLClient(apiKey: string | null): Client {
  const origin = window.location.origin;
  const websocket = createWsClient({
    url: `${origin.replace(/^http/, 'ws')}/graphql`,
    connectionParams: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    lazy: true,
    retryAttempts: Infinity,
  });
  return new Client({
    url: `${origin}/graphql`,
    // Lists re-read after every mutation (`additionalTypenames` on queries); no normalized cache to go stale.
    exchanges: [cacheExchange, fetchExchange, subscriptionExchange({
      forwardSubscription: (request) => ({
        subscribe: (sink) => ({ unsubscribe: websocket.subscribe({ ...request, query: request.query ?? '' }, sink) }),
      }),
    })],
    requestPolicy: 'cache-and-network',
    // urql 5 sends short queries as GET, which Apollo's CSRF prevention refuses (400) without a
    // content-type or preflight header: every query goes as a POST with a JSON body instead.
    preferGetMethod: false,
    fetchOptions: (): RequestInit => ({ headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} }),
  });
}
