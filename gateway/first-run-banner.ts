import type { Deployment } from '../control-plane/deployments/deployment.entity';
import type { FirstRunResult } from '../control-plane/workspaces/first-run';

/** What `npm start` prints: the base URL with a curl and an OpenAI SDK example that work as printed. */
export function firstRunBanner(result: FirstRunResult, baseUrl: (slug: string) => string, graphqlUrl: string): string {
  if (!result.created) {
    const lines = result.deployments.map((deployment: Deployment) => `  ${deployment.modelId}  ${deployment.status.padEnd(8)}  ${baseUrl(deployment.slug)}`);
    return [
      '',
      'Deployments:',
      ...(lines.length ? lines : ['  (none)']),
      '',
      'The API key was printed on the first start only (it is stored hashed). Create another with the',
      `createApiKey mutation at ${graphqlUrl}, or delete ./data to start over.`,
      '',
    ].join('\n');
  }
  const url = baseUrl(result.deployment.slug);
  return `
A dev workspace was created. Its API key is shown this once (only a hash is stored):

  API key:   ${result.apiKey}
  Base URL:  ${url}
  Model:     ${result.deployment.modelId}
  GraphQL:   ${graphqlUrl}

curl:

  curl ${url}/chat/completions \\
    -H "Authorization: Bearer ${result.apiKey}" \\
    -H "Content-Type: application/json" \\
    -d '{"messages": [{"role": "user", "content": "Hello!"}]}'

OpenAI SDK (node, \`npm install openai\`):

  import OpenAI from 'openai';
  const client = new OpenAI({ baseURL: '${url}', apiKey: '${result.apiKey}' });
  const completion = await client.chat.completions.create({
    model: '${result.deployment.modelId}',
    messages: [{ role: 'user', content: 'Hello!' }],
  });
  console.log(completion.choices[0].message.content);
`;
}
