/** One GraphQL call to a server of the benchmark with a bearer key; throws on GraphQL errors (the bench wants the data or a stop). */
export async function graphqlCall(baseUrl: string, key: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const response = await fetch(`${baseUrl}/graphql`, {
    method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: unknown; errors?: unknown };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}
