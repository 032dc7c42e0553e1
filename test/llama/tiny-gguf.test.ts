import { CHATML_TEMPLATE, TINY_VOCAB_SIZE, tinyGguf, tinyTokenCount } from '../../worker-agent/llama/tiny-gguf';
import { GGUF_ALIGNMENT } from '../../worker-agent/llama/gguf-writer';

/** Reads back what the writer wrote: header, metadata and tensor table (the parts llama.cpp checks first). */
function readGguf(bytes: Buffer) {
  let at = 0;
  const u32 = () => { const value = bytes.readUInt32LE(at); at += 4; return value; };
  const u64 = () => { const value = Number(bytes.readBigUInt64LE(at)); at += 8; return value; };
  const string = () => { const length = u64(); const value = bytes.toString('utf8', at, at + length); at += length; return value; };
  const value = (type: number): unknown => {
    switch (type) {
      case 4: return u32();
      case 5: { const v = bytes.readInt32LE(at); at += 4; return v; }
      case 6: { const v = bytes.readFloatLE(at); at += 4; return v; }
      case 7: return bytes[at++] === 1;
      case 8: return string();
      case 9: { const itemType = u32(); return Array.from({ length: u64() }, () => value(itemType)); }
      default: throw new Error(`unexpected type ${type}`);
    }
  };
  const magic = bytes.toString('latin1', 0, 4);
  at = 4;
  const version = u32();
  const tensorCount = u64();
  const metadataCount = u64();
  const metadata = new Map<string, unknown>();
  for (let index = 0; index < metadataCount; index++) {
    const key = string();
    metadata.set(key, value(u32()));
  }
  const tensors = Array.from({ length: tensorCount }, () => {
    const name = string();
    const dims = Array.from({ length: u32() }, () => u64());
    return { name, dims, type: u32(), offset: u64() };
  });
  const dataStart = Math.ceil(at / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;
  return { magic, version, metadata, tensors, dataStart };
}

describe('tiny GGUF generator', () => {
  it('writes a GGUF v3 llama model with the keys and tensors llama.cpp requires', () => {
    const file = readGguf(tinyGguf());
    expect(file).toMatchObject({ magic: 'GGUF', version: 3 });
    for (const key of ['general.architecture', 'llama.context_length', 'llama.embedding_length', 'llama.block_count', 'llama.feed_forward_length',
      'llama.attention.head_count', 'llama.attention.layer_norm_rms_epsilon', 'tokenizer.ggml.model', 'tokenizer.ggml.tokens', 'tokenizer.ggml.merges']) {
      expect(file.metadata.has(key)).toBe(true);
    }
    expect(file.metadata.get('general.architecture')).toBe('llama');
    expect(file.metadata.get('tokenizer.chat_template')).toBe(CHATML_TEMPLATE);
    const tokens = file.metadata.get('tokenizer.ggml.tokens') as string[];
    expect(tokens).toHaveLength(TINY_VOCAB_SIZE);
    // GPT-2's byte-to-unicode spelling: printable ASCII as itself, space as "Ġ", the specials last.
    expect([tokens[65], tokens[32], tokens[10], tokens.slice(256)]).toEqual(['A', 'Ġ', 'Ċ', ['<|endoftext|>', '<|im_start|>', '<|im_end|>']]);
    expect(new Set(tokens).size).toBe(TINY_VOCAB_SIZE);
    const names = file.tensors.map((tensor) => tensor.name);
    expect(names).toEqual(expect.arrayContaining(['token_embd.weight', 'blk.1.attn_q.weight', 'blk.1.ffn_down.weight', 'output_norm.weight', 'output.weight']));
    expect(file.tensors.find((tensor) => tensor.name === 'blk.0.attn_k.weight')!.dims).toEqual([64, 32]);
    expect(file.tensors.every((tensor) => tensor.type === 0 && tensor.offset % GGUF_ALIGNMENT === 0)).toBe(true);
  });

  it('writes an embedding variant: mean pooling, no output head, no chat template, the chat variant\'s other tensors', () => {
    const chat = readGguf(tinyGguf());
    const embedding = readGguf(tinyGguf({ variant: 'embedding' }));
    expect(embedding.metadata.get('llama.pooling_type')).toBe(1);
    expect(chat.metadata.has('llama.pooling_type')).toBe(false);
    expect(embedding.metadata.has('tokenizer.chat_template')).toBe(false);
    expect(embedding.metadata.get('general.name')).toBe('tiny-llama-embed');
    const names = (file: ReturnType<typeof readGguf>) => file.tensors.map((tensor) => tensor.name);
    expect(names(embedding)).toEqual(names(chat).filter((name) => name !== 'output.weight'));
  });

  it('is reproducible from its seed, and small', () => {
    const first = tinyGguf({ seed: 3 });
    expect(first.length).toBeLessThan(600_000);
    expect(tinyGguf({ seed: 3 }).equals(first)).toBe(true);
    expect(tinyGguf({ seed: 4 }).equals(first)).toBe(false);
    expect(readGguf(tinyGguf({ chatTemplate: null })).metadata.has('tokenizer.chat_template')).toBe(false);
    expect(() => tinyGguf({ embeddingLength: 60, heads: 8 })).toThrow('multiple of heads');
  });

  it('counts tokens like its byte-level tokenizer: one per byte, one per control token in template text', () => {
    expect(tinyTokenCount('héllo')).toBe(6);
    expect(tinyTokenCount('<|im_start|>user\nhi<|im_end|>', true)).toBe(1 + 7 + 1);
    expect(tinyTokenCount('<|im_end|>')).toBe(10);
  });
});
