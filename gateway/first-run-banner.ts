import type { Deployment } from '../control-plane/api/inference';
import type { FirstRunResult } from '../control-plane/api/startup';
import { REAL_ANSWERS_COMMAND } from './stand-in-engine';

/**
 * What `npm start` prints: the base URL with a curl and an OpenAI SDK example that work as
 * printed. A deployment answered by the built-in CPU stand-in (`standIn`) is said to be one,
 * with the line that serves real weights instead: its model id alone would promise answers
 * from that model.
 */
export function firstRunBanner(
  result: FirstRunResult, baseUrl: (slug: string) => string, graphqlUrl: string, standIn: (deployment: Deployment) => boolean, console?: ConsoleAccess,
): string {
  return firstRunText(result, baseUrl, graphqlUrl, standIn) + (console ? consoleText(console) : '');
}

/** Where the web console is and, on the embedded defaults, a one-time link that signs the dev workspace in. */
export interface ConsoleAccess {
  url: string;
  signInLink?: { url: string; expiresAt: Date };
}

function consoleText(access: ConsoleAccess): string {
  if (!access.signInLink) return `\nConsole:   ${access.url} (sign in with a workspace API key)\n`;
  const minutes = Math.max(1, Math.round((access.signInLink.expiresAt.getTime() - Date.now()) / 60_000));
  return [
    '',
    `Console:   ${access.url}`,
    `Sign in to the dev workspace with this one-time link (works once, for ${minutes} minutes; it creates`,
    'a key named "console sign-in"; a new link is printed at each start):',
    '',
    `  ${access.signInLink.url}`,
    '',
  ].join('\n');
}

function firstRunText(result: FirstRunResult, baseUrl: (slug: string) => string, graphqlUrl: string, standIn: (deployment: Deployment) => boolean): string {
  if (!result.created) {
    const lines = result.deployments.map((deployment: Deployment) =>
      `  ${deployment.modelId}  ${deployment.status.padEnd(8)}  ${baseUrl(deployment.slug)}${standIn(deployment) ? '  (built-in CPU stand-in)' : ''}`);
    const anyStandIn = result.deployments.some(standIn);
    return [
      '',
      'Deployments:',
      ...(lines.length ? lines : ['  (none)']),
      '',
      ...(anyStandIn ? [
        'Deployments marked "built-in CPU stand-in" answer with placeholder words: that engine has no',
        'model weights. For real answers, serve a GGUF file with llama.cpp:',
        '',
        `  ${REAL_ANSWERS_COMMAND}`,
        '',
        'and create a deployment of its model "local/<file name>" (a fresh ./data deploys it at once;',
        'README: "Real inference on CPU with llama.cpp").',
        '',
      ] : []),
      'The API key was printed on the first start only (it is stored hashed). Create another with the',
      `createApiKey mutation at ${graphqlUrl}, or delete ./data to start over.`,
      '',
    ].join('\n');
  }
  const url = baseUrl(result.deployment.slug);
  const standInNote = !standIn(result.deployment) ? '' : `
This deployment is a stand-in: the built-in CPU engine has no model weights and answers with
placeholder words, not ${result.deployment.modelId}'s. For real answers, serve a GGUF file
with llama.cpp on a fresh ./data (Ctrl-C, delete ./data, then):

  ${REAL_ANSWERS_COMMAND}

or keep this workspace and create a deployment of "local/<file name>" (README: "Real inference
on CPU with llama.cpp").
`;
  return `
A dev workspace was created. Its API key is shown this once (only a hash is stored):

  API key:   ${result.apiKey}
  Base URL:  ${url}
  Model:     ${result.deployment.modelId}
  GraphQL:   ${graphqlUrl}
${standInNote}
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
