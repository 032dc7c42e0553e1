import fc from 'fast-check';
import { assembleEmbeddingLists } from '../../control-plane/openai/embedding-lists';
import { NotJsonHere, topLevelMembers, valueEnd } from '../../common/json-spans';
import { forwardEmbeddingsBody } from '../../worker-agent/engines/engine-response';
import type { EngineSink } from '../../worker-agent/engines/engine';

/**
 * Joining split embeddings batches by splicing bytes must answer exactly what parsing and
 * rebuilding them answers; bodies the spans cannot read must still be joined (or refused) right.
 */
describe('embedding lists', () => {
  const list = (vectors: Array<number[] | string>, usage = { prompt_tokens: vectors.length, total_tokens: vectors.length }, model: unknown = 'm') =>
    ({ object: 'list', data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })), model, usage });
  const batchesOf = (sizes: number[]) => {
    let offset = 0;
    return sizes.map((count) => {
      const batch = { offset, count, body: Buffer.alloc(0) };
      offset += count;
      return batch;
    });
  };
  const joined = (bodies: unknown[], sizes: number[], space?: number) =>
    JSON.parse(assembleEmbeddingLists(batchesOf(sizes), bodies.map((body) => Buffer.from(JSON.stringify(body, null, space)))).toString());

  it('puts the batches\' items in input order with their indexes moved, and sums the usage', () => {
    const answer = joined([list([[0.5, -1e-7], [2, 3]]), list(['AAAAPw==']), list([[1.25, 0]])], [2, 1, 1]);
    expect(answer).toEqual({
      object: 'list', model: 'm', usage: { prompt_tokens: 4, total_tokens: 4 },
      data: [
        { object: 'embedding', index: 0, embedding: [0.5, -1e-7] }, { object: 'embedding', index: 1, embedding: [2, 3] },
        { object: 'embedding', index: 2, embedding: 'AAAAPw==' }, { object: 'embedding', index: 3, embedding: [1.25, 0] },
      ],
    });
  });

  it('splices the engine\'s bytes: its numbers are passed on as it wrote them, never re-serialised', () => {
    const bodies = ['{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1.50,2E0]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}',
      '{"object":"list","data":[{"object":"embedding","index":0,"embedding":[-0.000001000]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}'];
    expect(assembleEmbeddingLists(batchesOf([1, 1]), bodies.map((body) => Buffer.from(body))).toString()).toBe(
      '{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1.50,2E0]},{"object":"embedding","index":1,"embedding":[-0.000001000]}],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}');
  });

  it('reads pretty-printed answers, and answers whose items come out of order, as the rebuild does', () => {
    expect(joined([list([[1], [2]]), list([[3]])], [2, 1], 2).data.map((item: any) => item.index)).toEqual([0, 1, 2]);
    const shuffled = list([[1], [2]]);
    shuffled.data.reverse();
    expect(joined([shuffled, list([[3]])], [2, 1]).data).toEqual([
      { object: 'embedding', index: 0, embedding: [1] }, { object: 'embedding', index: 1, embedding: [2] }, { object: 'embedding', index: 2, embedding: [3] },
    ]);
  });

  it('refuses a batch answered with the wrong number of items, or with a body that is not JSON', () => {
    expect(() => joined([list([[1]]), list([[2]])], [2, 1])).toThrow(/answered 1 embeddings for a batch of 2 inputs/);
    expect(() => assembleEmbeddingLists(batchesOf([1, 1]), [Buffer.from(JSON.stringify(list([[1]]))), Buffer.from('{"data":[{"index":0,"embedding":[1')]))
      .toThrow(/not JSON/);
  });

  it('answers what parsing and rebuilding answers, for any lists', () => {
    const item = fc.oneof(fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { minLength: 1, maxLength: 8 }), fc.base64String({ minLength: 4, maxLength: 24 }));
    fc.assert(fc.property(
      fc.array(fc.array(item, { minLength: 1, maxLength: 5 }), { minLength: 2, maxLength: 4 }),
      fc.string(), fc.constantFrom(undefined, 2),
      (batches, model, space) => {
        const bodies = batches.map((vectors) => list(vectors, { prompt_tokens: vectors.length * 3, total_tokens: vectors.length * 3 }, model));
        const expected = {
          object: 'list', model,
          data: batches.flat().map((embedding, index) => ({ object: 'embedding', index, embedding: typeof embedding === 'string' ? embedding : JSON.parse(JSON.stringify(embedding)) })),
          usage: { prompt_tokens: batches.flat().length * 3, total_tokens: batches.flat().length * 3 },
        };
        expect(joined(bodies, batches.map((vectors) => vectors.length), space)).toEqual(expected);
      },
    ), { seed: 15, numRuns: 300 });
  });

  describe('spans', () => {
    it('finds each top-level value, strings with escaped quotes and nested arrays included', () => {
      const text = Buffer.from('{ "a" : "x\\"}]" , "b":[[1,2],{"c":[3]}], "n": -1.5e3, "t":true,"z":null }');
      const members = topLevelMembers(text);
      const values = Object.fromEntries([...members].map(([key, span]) => [key, JSON.parse(text.toString('utf8', span.start, span.end))]));
      expect(values).toEqual({ a: 'x"}]', b: [[1, 2], { c: [3] }], n: -1500, t: true, z: null });
    });

    it('throws NotJsonHere where the text is not JSON', () => {
      for (const bad of ['{"a":1', '{"a" 1}', '{"a":1} x', '[1,2', '{"a":"open}', '{a:1}', '{"a":1,,}', '']) {
        expect(() => topLevelMembers(Buffer.from(bad))).toThrow(NotJsonHere);
      }
      expect(() => valueEnd(Buffer.from('?'), 0)).toThrow(NotJsonHere);
    });
  });

  describe('the agent reading an engine\'s embeddings answer', () => {
    const sink = () => {
      const outputs: Buffer[] = [];
      return { outputs, sink: { output: async (data: Buffer) => void outputs.push(data), chunk: async () => {} } as unknown as EngineSink };
    };

    it('passes the body on unchanged and takes the engine\'s usage from it', async () => {
      const body = Buffer.from(JSON.stringify(list([[0.1, 0.2]], { prompt_tokens: 7, total_tokens: 7 })));
      const { outputs, sink: target } = sink();
      expect(await forwardEmbeddingsBody(body, target, () => 'hello')).toEqual({ usage: { promptTokens: 7, completionTokens: 0, totalTokens: 7 }, finishReason: '', usageEstimated: false });
      expect(outputs).toEqual([body]);
    });

    it('estimates the usage of an answer without one, and refuses a body that is not JSON', async () => {
      const { sink: target } = sink();
      const result = await forwardEmbeddingsBody(Buffer.from(JSON.stringify({ object: 'list', data: [] })), target, () => 'four words in here');
      expect(result.usageEstimated).toBe(true);
      expect(result.usage.promptTokens).toBeGreaterThan(0);
      await expect(forwardEmbeddingsBody(Buffer.from('{"data":[1,2'), target, () => '')).rejects.toMatchObject({ code: 'engine_error' });
    });
  });
});
