import type { EngineSink } from '../../worker-agent/engines/engine';
import { forwardEmbeddingsBody, forwardJsonBody } from '../../worker-agent/engines/engine-response';
import { modelRename, renameBodyModel } from '../../worker-agent/engines/model-rename';

// Issue 35: whole answers relayed from an engine sent another name than the catalog model's.
const rename = modelRename('served-name', 'acme/catalog-model')!;

async function forwarded(forward: typeof forwardJsonBody, body: string): Promise<string> {
  const outputs: Buffer[] = [];
  const sink: EngineSink = { chunk: () => undefined, output: (data) => { outputs.push(data); return undefined; } };
  await forward(Buffer.from(body), sink, () => 'prompt', rename);
  return Buffer.concat(outputs).toString('utf8');
}

describe('the catalog model in whole answers', () => {
  test('only the top-level model is replaced; every other byte stays the engine\'s', async () => {
    const body = '{"id":"c","model":"served-name","choices":[{"index":0,"message":{"role":"assistant","content":"{\\"model\\":\\"served-name\\"}"},"finish_reason":"stop"}],"x":1.50,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}';
    expect(await forwarded(forwardJsonBody, body)).toBe(body.replace('"model":"served-name"', '"model":"acme/catalog-model"'));
  });

  test('spaced JSON and a name written with escapes are replaced too', async () => {
    const body = '{ "model" : "served\\u002dname", "choices": [] }';
    expect(await forwarded(forwardJsonBody, body)).toBe('{ "model" : "acme/catalog-model", "choices": [] }');
  });

  test('an answer naming another model is passed on as it is', async () => {
    const body = '{"model":"served-name-2","choices":[]}';
    expect(await forwarded(forwardJsonBody, body)).toBe(body);
  });

  test('a body the spans cannot follow is written anew from the parse, model replaced', async () => {
    // json-spans takes an array starting with a number to end at its first `]`.
    const body = '{"model":"served-name","odd":[1,[2]],"choices":[]}';
    expect(renameBodyModel(Buffer.from(body), rename)).toBeUndefined();
    expect(JSON.parse(await forwarded(forwardJsonBody, body))).toEqual({ model: 'acme/catalog-model', odd: [1, [2]], choices: [] });
  });

  test('embeddings: the model is replaced in the spans already read for usage, the vectors untouched', async () => {
    const body = '{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.10,-0.20]}],"model":"served-name","usage":{"prompt_tokens":2,"total_tokens":2}}';
    expect(await forwarded(forwardEmbeddingsBody, body)).toBe(body.replace('"served-name"', '"acme/catalog-model"'));
  });
});
