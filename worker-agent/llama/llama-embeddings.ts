/**
 * Real embeddings from the loaded GGUF model: node-llama-cpp's embedding context (a second
 * llama.cpp context with embeddings on, made at the first embeddings job) evaluates each input
 * and reads the model's pooled output, which is scaled to unit length as OpenAI's are.
 * Inputs run one at a time: the context has one sequence, and an embedding model's inputs
 * are short, so a batch costs its total tokens either way.
 */
import type { LlamaEmbeddingContext, LlamaModel, Token } from 'node-llama-cpp';
import type { EmbeddingSpec } from '../../proto/worker/v1/index';
import { embeddingAnswer, embeddingInputs, requestedDimensions, tooLong, unitLength, type EmbeddingAnswer } from '../engines/embedding-answer';
import { EngineFailure } from '../engines/engine-failure';

export class LlamaEmbedder {
  private context: Promise<LlamaEmbeddingContext> | null = null;

  constructor(private readonly model: LlamaModel, private readonly contextSize: number, private readonly threads: number) {}

  async embed(payload: Record<string, unknown>, spec: EmbeddingSpec | null | undefined, modelName: string, signal: AbortSignal): Promise<EmbeddingAnswer> {
    const inputs = embeddingInputs(payload.input);
    // The context must also hold the beginning/end tokens llama.cpp adds around each input.
    const maxInputTokens = Math.min(spec?.maxInputTokens || Number.MAX_SAFE_INTEGER, this.contextSize - 1);
    const vocabulary = this.model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
    const context = await this.embeddingContext();
    const tokenized = inputs.map((input, index) => {
      if (typeof input !== 'string' && input.some((token) => token >= vocabulary)) {
        throw new EngineFailure('invalid_job', `token ids in input[${index}] must be below the vocabulary size ${vocabulary}`);
      }
      // A copy: node-llama-cpp adds the beginning/end tokens to the array it is given.
      const tokens = typeof input === 'string' ? this.model.tokenize(input, false) : [...input] as Token[];
      const length = context.calculateInputLength([...tokens]);
      if (length > maxInputTokens) throw tooLong(index, length, maxInputTokens);
      return { tokens, length };
    });
    const native = this.model.embeddingVectorSize;
    const dimensions = requestedDimensions(payload.dimensions, native);
    const vectors: Float32Array[] = [];
    for (const { tokens } of tokenized) {
      if (signal.aborted) throw signal.reason;
      const embedding = await context.getEmbeddingFor(tokens);
      if (embedding.vector.length !== native) throw new EngineFailure('engine_error', `llama.cpp returned a vector of ${embedding.vector.length} numbers, not ${native}`);
      vectors.push(unitLength(embedding.vector, dimensions));
    }
    const promptTokens = tokenized.reduce((sum, input) => sum + input.length, 0);
    return embeddingAnswer(vectors, promptTokens, modelName, payload.encoding_format === 'base64');
  }

  async close(): Promise<void> {
    const context = this.context;
    this.context = null;
    await (await context?.catch(() => null))?.dispose();
  }

  private embeddingContext(): Promise<LlamaEmbeddingContext> {
    this.context ??= this.model.createEmbeddingContext({ contextSize: this.contextSize, threads: this.threads }).catch((error: Error) => {
      this.context = null;
      throw new EngineFailure('engine_error', `llama.cpp could not make an embedding context: ${error.message}`, { cause: error });
    });
    return this.context;
  }
}
