import { cpuEmbeddings } from '../../worker-agent/engines/cpu-embeddings';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';

const SPEC = { dimensions: 384, maxInputTokens: 8 };

function vectors(payload: Record<string, unknown>, model = 'acme/embed'): number[][] {
  const body = JSON.parse(cpuEmbeddings(payload, SPEC, model).body.toString('utf8')) as { data: Array<{ embedding: number[] }> };
  return body.data.map((item) => item.embedding);
}

describe('CPU engine embeddings', () => {
  it('answers deterministic unit vectors of the model\'s dimension, different per input and per model', () => {
    const [first, second, again] = vectors({ input: ['same', 'other', 'same'] });
    expect(first).toHaveLength(384);
    expect(Math.hypot(...first)).toBeCloseTo(1, 6);
    expect(again).toEqual(first);
    expect(second).not.toEqual(first);
    expect(vectors({ input: 'same' }, 'acme/other')[0]).not.toEqual(first);
    expect(vectors({ input: 'same', dimensions: 64 })[0]).toHaveLength(64);
  });

  it('encodes base64 as little-endian float32, decoding to the float answer', () => {
    const answer = JSON.parse(cpuEmbeddings({ input: 'x', encoding_format: 'base64' }, SPEC, 'm').body.toString('utf8')) as { data: Array<{ embedding: string }> };
    const bytes = Buffer.from(answer.data[0].embedding, 'base64');
    expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4))).toEqual(vectors({ input: 'x' }, 'm')[0]);
  });

  it('counts tokens for usage and refuses an input over the limit instead of truncating it', () => {
    expect(cpuEmbeddings({ input: ['a b', 'c.'] }, SPEC, 'm').usage).toEqual({ promptTokens: 4, completionTokens: 0, totalTokens: 4 });
    expect(cpuEmbeddings({ input: [[1, 2, 3], [4]] }, SPEC, 'm').usage.promptTokens).toBe(4);
    let error: unknown;
    try {
      cpuEmbeddings({ input: ['ok', 'one two three four five six seven eight nine'] }, SPEC, 'm');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(EngineFailure);
    expect((error as EngineFailure).code).toBe('invalid_job');
    expect((error as EngineFailure).message).toMatch(/^input\[1\] is 9 tokens, over the model's limit of 8 input tokens/);
  });
});
