/** GraphQL over HTTP with a bearer token; returns data and errors as the server sent them. */
export function graphqlClient(url: string, token: string) {
  return async (query: string, variables: Record<string, unknown> = {}, as = token) => {
    const response = await fetch(`${url}/graphql`, {
      method: 'POST', headers: { authorization: `Bearer ${as}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
    });
    return (await response.json()) as { data?: any; errors?: Array<{ message: string; extensions: { code: string; param?: string } }> };
  };
}

export const OPERATOR_TOKEN = 'op-test-operator-token-0123456789abcdef';
