import { useEffect, useRef, useState } from 'react';
import { Link, useSearchParams } from 'react-router-dom';
import { useClient, useMutation, useQuery, type CombinedError } from 'urql';
import { graphql } from '../gql';
import type { PlaygroundChatInput } from '../gql/graphql';
import { Empty, ErrorView, fieldError, Loading } from '../components/states';

const TARGETS = graphql(`
  query PlaygroundTargets {
    deployments { id slug modelId status }
    catalog { id name task sizes }
    apiKeys { id name displayPrefix }
  }
`);

/** The adapters attached to the chosen deployment: each is a `model` the request may name instead of the base. */
const MODELS = graphql(`
  query PlaygroundModels($deploymentId: ID!) { adapters(deploymentId: $deploymentId) { id name } }
`);

const CHAT = graphql(`
  subscription PlaygroundChat($input: PlaygroundChatInput!) {
    playgroundChat(input: $input) { requestId content done finishReason toolCalls promptTokens completionTokens }
  }
`);

const IMAGE = graphql(`
  mutation PlaygroundImage($input: PlaygroundImageInput!) {
    playgroundImage(input: $input) { requestId urls }
  }
`);

interface ToolCall { id: string; type: string; function: { name: string; arguments: string } }

/** A turn of the conversation as the page shows it and sends it back. */
interface Turn {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
  /** Assistant turns: how it ended, its tokens and request id. */
  end?: { finishReason: string | null; promptTokens: number | null; completionTokens: number | null; requestId: string };
}

const EXAMPLE_TOOLS = JSON.stringify([{
  type: 'function',
  function: {
    name: 'get_weather', description: 'The current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}], null, 2);

const EXAMPLE_SCHEMA = JSON.stringify({
  type: 'object', properties: { city: { type: 'string' }, celsius: { type: 'integer' } }, required: ['city', 'celsius'], additionalProperties: false,
}, null, 2);

/** The playground's deployments: chat models to talk to, image models to draw with. */
const TASKS = ['chat', 'image-generation'];

/**
 * Try a deployment without writing code: chat with it (the answer streams in; tools as JSON,
 * their calls answered by hand; structured output by a JSON schema), or make an image. Each
 * request runs as one of the workspace's API keys, chosen here: it goes through the same
 * admission, rate limits, billing and request log as a call to the deployment's URL with that
 * key (the server's `playgroundChat` and `playgroundImage`).
 */
export function Playground() {
  const [params, setParams] = useSearchParams();
  const [{ data, fetching, error }] = useQuery({ query: TARGETS, requestPolicy: 'cache-and-network' });
  const tasks = new Map(data?.catalog.map((model) => [model.id, model]) ?? []);
  const deployments = (data?.deployments ?? []).filter((deployment) => TASKS.includes(tasks.get(deployment.modelId)?.task ?? '') && deployment.status !== 'Deleted');
  const deploymentId = params.get('deployment') ?? deployments[0]?.id ?? '';
  const deployment = deployments.find((item) => item.id === deploymentId);
  const model = deployment ? tasks.get(deployment.modelId) : undefined;
  const [apiKeyId, setApiKeyId] = useState('');
  const keyId = apiKeyId || data?.apiKeys[0]?.id || '';

  return (
    <section>
      <header className="page-header"><h1>Playground</h1></header>
      <p className="muted">Requests run as the API key chosen here: they are rate-limited, billed and logged like any call with it.</p>
      {error && <ErrorView error={error} title="The deployments and keys could not be loaded" />}
      {!data && fetching && <Loading what="deployments and keys" />}
      {data && deployments.length === 0 && <Empty>No chat or image deployment yet. <Link to="/catalog">Deploy one from the catalog.</Link></Empty>}
      {data && deployments.length > 0 && (
        <>
          <div className="filters">
            <div>
              <label htmlFor="playground-deployment">Deployment</label>
              <select id="playground-deployment" value={deploymentId} onChange={(event) => setParams({ deployment: event.target.value }, { replace: true })}>
                {deployments.map((item) => <option key={item.id} value={item.id}>{item.modelId} ({item.slug}, {item.status})</option>)}
              </select>
            </div>
            <div>
              <label htmlFor="playground-key">API key</label>
              <select id="playground-key" value={keyId} onChange={(event) => setApiKeyId(event.target.value)}>
                {data.apiKeys.map((key) => <option key={key.id} value={key.id}>{key.name} ({key.displayPrefix}…)</option>)}
              </select>
            </div>
          </div>
          {deployment && model?.task === 'chat' && <Chat key={deployment.id} deploymentId={deployment.id} baseModel={deployment.modelId} apiKeyId={keyId} />}
          {deployment && model?.task === 'image-generation' && <ImageTry key={deployment.id} deploymentId={deployment.id} apiKeyId={keyId} sizes={model.sizes} />}
        </>
      )}
    </section>
  );
}

function Chat({ deploymentId, baseModel, apiKeyId }: { deploymentId: string; baseModel: string; apiKeyId: string }) {
  const client = useClient();
  const [models] = useQuery({ query: MODELS, variables: { deploymentId }, requestPolicy: 'cache-and-network' });
  const [requestModel, setRequestModel] = useState(baseModel);
  const [system, setSystem] = useState('');
  const [turns, setTurns] = useState<Turn[]>([]);
  const [message, setMessage] = useState('');
  const [tools, setTools] = useState('');
  const [toolChoice, setToolChoice] = useState('auto');
  const [schema, setSchema] = useState('');
  const [maxTokens, setMaxTokens] = useState('256');
  const [temperature, setTemperature] = useState('');
  const [answer, setAnswer] = useState<string | null>(null);
  const [failure, setFailure] = useState<CombinedError | null>(null);
  const [toolResults, setToolResults] = useState<Record<string, string>>({});
  const running = useRef<{ unsubscribe(): void } | null>(null);
  useEffect(() => () => running.current?.unsubscribe(), []);

  const pendingCalls = (() => {
    const last = turns[turns.length - 1];
    return last?.role === 'assistant' && last.toolCalls ? last.toolCalls : [];
  })();

  /** Sends the conversation with `added` turns and streams the answer into the page. */
  const send = (added: Turn[]) => {
    const conversation = [...turns, ...added];
    const input: PlaygroundChatInput = {
      deploymentId, apiKeyId,
      // The base model is the default; an attached adapter is named as clients name it in /v1's `model`.
      model: requestModel === baseModel ? null : requestModel,
      messages: [...(system.trim() ? [{ role: 'system', content: system }] : []), ...conversation].map((turn) => ({
        role: turn.role, content: turn.content,
        toolCalls: 'toolCalls' in turn && turn.toolCalls ? JSON.stringify(turn.toolCalls) : null,
        toolCallId: 'toolCallId' in turn ? turn.toolCallId ?? null : null,
      })),
      tools: tools.trim() || null,
      toolChoice: tools.trim() ? toolChoice : null,
      responseSchema: schema.trim() || null,
      maxTokens: maxTokens.trim() ? Number(maxTokens) : null,
      temperature: temperature.trim() ? Number(temperature) : null,
    };
    setFailure(null);
    setAnswer('');
    let text = '';
    running.current = client.subscription(CHAT, { input }).subscribe((result) => {
      if (result.error) {
        setFailure(result.error);
        setAnswer(null);
        running.current = null;
        return;
      }
      const piece = result.data?.playgroundChat;
      if (!piece) return;
      text += piece.content;
      if (!piece.done) {
        setAnswer(text);
        return;
      }
      const calls = piece.toolCalls ? JSON.parse(piece.toolCalls) as ToolCall[] : undefined;
      setTurns([...conversation, {
        role: 'assistant', content: text, toolCalls: calls,
        end: { finishReason: piece.finishReason, promptTokens: piece.promptTokens, completionTokens: piece.completionTokens, requestId: piece.requestId },
      }]);
      setAnswer(null);
      setToolResults({});
      running.current = null;
    });
    if (added.some((turn) => turn.role === 'user')) setMessage('');
  };

  const stop = () => {
    running.current?.unsubscribe();
    running.current = null;
    setAnswer(null);
  };

  const busy = answer !== null;
  const fieldOf = (name: string) => failure?.graphQLErrors.find((item) => {
    const param = String(item.extensions?.param ?? '');
    return param === name || param.startsWith(`${name}[`) || param.startsWith(`${name}.`);
  })?.message;
  const placed = ['model', 'tools', 'toolChoice', 'responseSchema', 'maxTokens', 'temperature'].some((name) => fieldOf(name));
  const adapters = models.data?.adapters ?? [];
  const modelError = fieldOf('model');

  return (
    <div className="playground">
      {(adapters.length > 0 || requestModel !== baseModel) && (
        <div>
          <label htmlFor="playground-model">Model</label>
          <select id="playground-model" value={requestModel} onChange={(event) => setRequestModel(event.target.value)}
            aria-invalid={modelError ? true : undefined} aria-describedby={modelError ? 'playground-model-error' : undefined}>
            <option value={baseModel}>{baseModel} (base model)</option>
            {adapters.map((adapter) => <option key={adapter.id} value={adapter.name}>{adapter.name} (LoRA adapter)</option>)}
          </select>
          {modelError && <p id="playground-model-error" className="field-error">{modelError}</p>}
        </div>
      )}
      <div className="conversation" role="log" aria-label="Conversation" aria-live="polite">
        {turns.length === 0 && !busy && <p className="muted">Say something to start.</p>}
        {turns.map((turn, index) => <TurnView key={index} turn={turn} />)}
        {busy && <div className="turn turn-assistant" aria-busy="true"><strong>assistant</strong><p data-testid="streaming-answer">{answer || '…'}</p></div>}
      </div>
      {failure && !placed && <ErrorView error={failure} title="The request was refused or failed" />}

      {pendingCalls.length > 0 && !busy && (
        <form className="tool-results" aria-label="Tool results" onSubmit={(event) => {
          event.preventDefault();
          send(pendingCalls.map((call) => ({ role: 'tool', toolCallId: call.id, content: toolResults[call.id] ?? '' })));
        }}>
          <p>The model called {pendingCalls.length === 1 ? 'a tool' : `${pendingCalls.length} tools`}: answer as your code would, then send.</p>
          {pendingCalls.map((call) => (
            <div key={call.id}>
              <label htmlFor={`tool-result-${call.id}`}>Result of {call.function.name}({call.function.arguments})</label>
              <textarea id={`tool-result-${call.id}`} rows={2} value={toolResults[call.id] ?? ''} onChange={(event) => setToolResults({ ...toolResults, [call.id]: event.target.value })} />
            </div>
          ))}
          <button type="submit">Send tool results</button>
        </form>
      )}

      <form aria-label="Send a message" onSubmit={(event) => {
        event.preventDefault();
        if (message.trim() && !busy) send([{ role: 'user', content: message }]);
      }}>
        <label htmlFor="playground-message">Message</label>
        <textarea id="playground-message" rows={3} value={message} onChange={(event) => setMessage(event.target.value)} />
        <div className="actions">
          <button type="submit" disabled={busy || !message.trim() || !apiKeyId}>Send</button>
          {busy && <button type="button" onClick={stop}>Stop</button>}
          <button type="button" className="link" disabled={busy} onClick={() => { setTurns([]); setFailure(null); }}>Clear the conversation</button>
        </div>

        <details>
          <summary>System prompt, tools, structured output and sampling</summary>
          <label htmlFor="playground-system">System prompt</label>
          <textarea id="playground-system" rows={2} value={system} onChange={(event) => setSystem(event.target.value)} />
          <JsonField id="playground-tools" label="Tools (JSON, the Chat Completions tools array)" value={tools} onChange={setTools} error={fieldOf('tools')}
            example={EXAMPLE_TOOLS} />
          <label htmlFor="playground-tool-choice">Tool choice</label>
          <select id="playground-tool-choice" value={toolChoice} onChange={(event) => setToolChoice(event.target.value)} disabled={!tools.trim()}
            aria-invalid={fieldOf('toolChoice') ? true : undefined}>
            <option value="auto">auto</option>
            <option value="required">required</option>
            <option value="none">none</option>
          </select>
          <JsonField id="playground-schema" label="Structured output (a JSON schema the answer must follow)" value={schema} onChange={setSchema}
            error={fieldOf('responseSchema')} example={EXAMPLE_SCHEMA} />
          <div className="filters">
            <div>
              <label htmlFor="playground-max-tokens">Max tokens</label>
              <input id="playground-max-tokens" inputMode="numeric" value={maxTokens} onChange={(event) => setMaxTokens(event.target.value)}
                aria-invalid={fieldOf('maxTokens') ? true : undefined} aria-describedby={fieldOf('maxTokens') ? 'playground-max-tokens-error' : undefined} />
              {fieldOf('maxTokens') && <p id="playground-max-tokens-error" className="field-error">{fieldOf('maxTokens')}</p>}
            </div>
            <div>
              <label htmlFor="playground-temperature">Temperature</label>
              <input id="playground-temperature" inputMode="decimal" value={temperature} placeholder="default" onChange={(event) => setTemperature(event.target.value)}
                aria-invalid={fieldOf('temperature') ? true : undefined} aria-describedby={fieldOf('temperature') ? 'playground-temperature-error' : undefined} />
              {fieldOf('temperature') && <p id="playground-temperature-error" className="field-error">{fieldOf('temperature')}</p>}
            </div>
          </div>
        </details>
      </form>
    </div>
  );
}

function TurnView({ turn }: { turn: Turn }) {
  const json = turn.role === 'assistant' && turn.content.trim().startsWith('{') ? prettyJson(turn.content) : null;
  return (
    <div className={`turn turn-${turn.role}`} data-testid={`turn-${turn.role}`}>
      <strong>{turn.role === 'tool' ? 'tool result' : turn.role}</strong>
      {json ? <pre>{json}</pre> : turn.content && <p>{turn.content}</p>}
      {turn.toolCalls && (
        <ul aria-label="Tool calls">
          {turn.toolCalls.map((call) => <li key={call.id}><code>{call.function.name}({call.function.arguments})</code></li>)}
        </ul>
      )}
      {turn.end && (
        <p className="muted" data-testid="turn-end">
          {turn.end.finishReason ?? 'ended'} · {turn.end.promptTokens ?? '?'} prompt + {turn.end.completionTokens ?? '?'} completion tokens · <code>{turn.end.requestId}</code>
        </p>
      )}
    </div>
  );
}

function prettyJson(text: string): string | null {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return null;
  }
}

/** A JSON text area with an example to start from and the API's own refusal beside it. */
function JsonField({ id, label, value, onChange, error, example }: { id: string; label: string; value: string; onChange: (value: string) => void; error?: string; example: string }) {
  return (
    <div>
      <label htmlFor={id}>{label}</label>
      <textarea id={id} rows={value ? 8 : 2} spellCheck={false} className="code" value={value} onChange={(event) => onChange(event.target.value)}
        aria-invalid={error ? true : undefined} aria-describedby={error ? `${id}-error` : undefined} placeholder="empty: none" />
      {error && <p id={`${id}-error`} className="field-error">{error}</p>}
      {!value && <button type="button" className="link" onClick={() => onChange(example)}>Start from an example</button>}
    </div>
  );
}

function ImageTry({ deploymentId, apiKeyId, sizes }: { deploymentId: string; apiKeyId: string; sizes: string[] }) {
  const [prompt, setPrompt] = useState('a lighthouse at dusk');
  const [size, setSize] = useState(sizes.includes('1024x1024') ? '1024x1024' : sizes[0] ?? '');
  const [made, make] = useMutation(IMAGE);
  const image = made.data?.playgroundImage;
  return (
    <form aria-label="Image" onSubmit={(event) => {
      event.preventDefault();
      void make({ input: { deploymentId, apiKeyId, prompt, size } });
    }}>
      <label htmlFor="playground-prompt">Prompt</label>
      <textarea id="playground-prompt" rows={2} value={prompt} onChange={(event) => setPrompt(event.target.value)}
        aria-invalid={fieldError(made.error, 'prompt') ? true : undefined} />
      <label htmlFor="playground-size">Size</label>
      <select id="playground-size" value={size} onChange={(event) => setSize(event.target.value)}>
        {sizes.map((item) => <option key={item} value={item}>{item}</option>)}
      </select>
      <div className="actions"><button type="submit" disabled={made.fetching || !prompt.trim() || !apiKeyId}>{made.fetching ? 'Generating…' : 'Generate'}</button></div>
      {made.error && <ErrorView error={made.error} title="The image was not made" />}
      {image && (
        <figure className="generated">
          {image.urls.map((url) => <img key={url} src={url} alt={`Generated: ${prompt}`} />)}
          <figcaption className="muted">Request <Link to={`/requests/${image.requestId}`}><code>{image.requestId}</code></Link>; the link is signed and expires.</figcaption>
        </figure>
      )}
    </form>
  );
}
