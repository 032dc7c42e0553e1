import { Catalog } from '../../control-plane/catalog/catalog';
import { AppError } from '../../control-plane/errors/app-error';

const EMBEDDING_MODEL = {
  id: 'acme/embed', name: 'Acme Embed', modality: 'text', task: 'embedding', engine: 'vllm', official: false,
  gpuMemoryGb: 8, inputModalities: ['text'], sizes: [], targetConcurrency: 64,
  embedding: { dimensions: 384, maxInputTokens: 256, maxBatchInputs: 32 },
};

describe('catalog embedding models', () => {
  it('lists the embedding models of the issue with their dimensions and input limits', () => {
    const catalog = Catalog.load();
    for (const id of ['BAAI/bge-large-en-v1.5', 'intfloat/multilingual-e5-large']) {
      const model = catalog.get(id);
      expect(model).toMatchObject({ modality: 'text', task: 'embedding' });
      expect(model.embedding).toMatchObject({ dimensions: 1024, maxInputTokens: 512 });
      expect(model.embedding!.minDimensions).toBeUndefined();
    }
    expect(catalog.get('nomic-ai/nomic-embed-text-v1.5').embedding).toMatchObject({ dimensions: 768, minDimensions: 64 });
    expect(catalog.models.filter((model) => model.task !== 'embedding').every((model) => model.embedding === undefined)).toBe(true);
  });

  it('accepts a well-formed embedding model', () => {
    expect(new Catalog([]).register(EMBEDDING_MODEL).embedding).toEqual(EMBEDDING_MODEL.embedding);
  });

  it.each([
    ['an embedding model without its fields', { ...EMBEDDING_MODEL, embedding: undefined }, 'embedding'],
    ['embedding fields on a chat model', { ...EMBEDDING_MODEL, task: 'chat' }, 'embedding'],
    ['a zero dimension', { ...EMBEDDING_MODEL, embedding: { ...EMBEDDING_MODEL.embedding, dimensions: 0 } }, 'embedding'],
    ['minDimensions above dimensions', { ...EMBEDDING_MODEL, embedding: { ...EMBEDDING_MODEL.embedding, minDimensions: 512 } }, 'embedding'],
    ['an image embedding model', { ...EMBEDDING_MODEL, modality: 'image' }, 'modality'],
  ])('refuses %s', (_what, model, param) => {
    const error = captureError(() => new Catalog([]).register(model));
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).param).toBe(param);
  });
});

function captureError(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}
