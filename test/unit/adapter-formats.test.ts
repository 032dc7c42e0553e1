import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AdapterFormatError, GGUF_TYPE, inspectAdapter, tarFiles } from '../../common/adapter-formats';
import { ggufHeader } from '../support/gguf-header-writer';

const gguf = ggufHeader;

const LORA_META: Array<[string, number, unknown]> = [
  ['general.architecture', GGUF_TYPE.STRING, 'llama'], ['general.type', GGUF_TYPE.STRING, 'adapter'],
  ['adapter.type', GGUF_TYPE.STRING, 'lora'], ['adapter.lora.alpha', GGUF_TYPE.FLOAT32, 16],
];

/** A safetensors file of F32 zeros with the given tensor shapes. */
function safetensors(tensors: Record<string, number[]>): Buffer {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const [name, shape] of Object.entries(tensors)) {
    const size = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([length, json, Buffer.alloc(offset)]);
}

const PEFT_TENSORS = {
  'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': [8, 64],
  'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight': [64, 8],
  'base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight': [8, 64],
  'base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight': [32, 8],
};

let dir: string;
beforeAll(() => { dir = mkdtempSync(path.join(tmpdir(), 'adapter-formats-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A tar made by the system's GNU tar (a real archiver, not our own writer). */
function tarOf(files: Record<string, Buffer | string>, format = 'ustar'): Buffer {
  const root = mkdtempSync(path.join(dir, 'src-'));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), content);
  }
  const out = path.join(dir, `${path.basename(root)}.tar`);
  execFileSync('tar', [`--format=${format}`, '-cf', out, '-C', root, ...Object.keys(files)]);
  return readFileSync(out);
}

function failure(run: () => unknown): AdapterFormatError {
  try { run(); } catch (error) { if (error instanceof AdapterFormatError) return error; throw error; }
  throw new Error('expected an AdapterFormatError');
}

describe('GGUF LoRA adapters', () => {
  it('reads rank, alpha, architecture and the adapted modules', () => {
    const facts = inspectAdapter(gguf(LORA_META, [
      ['blk.0.attn_q.weight.lora_a', [64, 4]], ['blk.0.attn_q.weight.lora_b', [4, 64]],
      ['blk.1.attn_v.weight.lora_a', [64, 4]], ['blk.1.attn_v.weight.lora_b', [4, 16]],
    ]), 'GGUF');
    expect(facts).toMatchObject({ format: 'GGUF', rank: 4, alpha: 16, architecture: 'llama', targetModules: ['attn_q', 'attn_v'], tensorCount: 4 });
    expect(facts.pairs).toContainEqual({ base: 'blk.1.attn_v.weight', rank: 4, inputs: 64, outputs: 16 });
  });

  it('refuses an integer alpha, which would abort llama.cpp', () => {
    const meta = LORA_META.map(([k, t, v]) => (k === 'adapter.lora.alpha' ? [k, GGUF_TYPE.UINT32, 16] : [k, t, v]) as [string, number, unknown]);
    expect(failure(() => inspectAdapter(gguf(meta, [['blk.0.attn_q.weight.lora_a', [64, 4]], ['blk.0.attn_q.weight.lora_b', [4, 64]]]), 'GGUF')).field).toBe('adapter.lora.alpha');
  });

  it.each([
    ['a model, not an adapter', [['general.type', GGUF_TYPE.STRING, 'model']], [], 'general.type'],
    ['a lora_a whose rank is not lora_b\'s', [], [['blk.0.attn_q.weight.lora_a', [64, 4]], ['blk.0.attn_q.weight.lora_b', [8, 64]]], 'blk.0.attn_q.weight'],
    ['a lora_a without lora_b', [], [['blk.0.attn_q.weight.lora_a', [64, 4]]], 'blk.0.attn_q.weight'],
    ['a tensor that is no LoRA half', [], [['blk.0.attn_q.weight', [64, 64]]], 'blk.0.attn_q.weight'],
    ['no tensor at all', [], [], 'tensors'],
  ] as Array<[string, Array<[string, number, unknown]>, Array<[string, number[]]>, string]>)('refuses %s, naming it', (_what, override, tensors, field) => {
    const meta = LORA_META.map(([k, t, v]) => override.find(([key]) => key === k) ?? [k, t, v]) as Array<[string, number, unknown]>;
    expect(failure(() => inspectAdapter(gguf(meta, tensors), 'GGUF')).field).toBe(field);
  });

  it('refuses a header that claims more than the file holds, without allocating it', () => {
    const bytes = gguf(LORA_META, [['blk.0.attn_q.weight.lora_a', [64, 4]], ['blk.0.attn_q.weight.lora_b', [4, 64]]]);
    bytes.writeBigUInt64LE(2n ** 40n, 16); // the metadata count
    expect(failure(() => inspectAdapter(bytes, 'GGUF')).message).toMatch(/larger than the file/);
    expect(failure(() => inspectAdapter(bytes.subarray(0, 60), 'GGUF')).field).toBe('gguf');
    expect(failure(() => inspectAdapter(Buffer.from('not a gguf file at all....'), 'GGUF')).message).toMatch(/magic/);
  });
});

describe('PEFT adapters', () => {
  const config = { peft_type: 'LORA', r: 8, lora_alpha: 16, base_model_name_or_path: 'meta-llama/Llama-3.1-8B-Instruct', target_modules: ['q_proj', 'v_proj'] };

  it('reads a tar of adapter_config.json and adapter_model.safetensors, in a directory too', () => {
    for (const prefix of ['', 'my-adapter/']) {
      const facts = inspectAdapter(tarOf({ [`${prefix}adapter_config.json`]: JSON.stringify(config), [`${prefix}adapter_model.safetensors`]: safetensors(PEFT_TENSORS) }), 'PEFT_TAR');
      expect(facts).toMatchObject({ format: 'PEFT_TAR', rank: 8, alpha: 16, baseModel: 'meta-llama/Llama-3.1-8B-Instruct', targetModules: ['q_proj', 'v_proj'], architecture: null });
    }
  });

  it('reads pax archives with long names', () => {
    const deep = `${'d'.repeat(120)}/`;
    const facts = inspectAdapter(tarOf({ [`${deep}adapter_config.json`]: JSON.stringify(config), [`${deep}adapter_model.safetensors`]: safetensors(PEFT_TENSORS) }, 'pax'), 'PEFT_TAR');
    expect(facts.rank).toBe(8);
  });

  it('refuses an r the weights do not have, pickled weights, and a missing config', () => {
    expect(failure(() => inspectAdapter(tarOf({ 'adapter_config.json': JSON.stringify({ ...config, r: 16 }), 'adapter_model.safetensors': safetensors(PEFT_TENSORS) }), 'PEFT_TAR')).field).toBe('adapter_config.json r');
    expect(failure(() => inspectAdapter(tarOf({ 'adapter_config.json': JSON.stringify(config), 'adapter_model.bin': 'pickle' }), 'PEFT_TAR')).message).toMatch(/pickled/);
    expect(failure(() => inspectAdapter(tarOf({ 'adapter_model.safetensors': safetensors(PEFT_TENSORS) }), 'PEFT_TAR')).field).toBe('adapter_config.json');
    expect(failure(() => inspectAdapter(tarOf({ 'adapter_config.json': '{not json', 'adapter_model.safetensors': safetensors(PEFT_TENSORS) }), 'PEFT_TAR')).field).toBe('adapter_config.json');
  });

  it('refuses safetensors whose data does not match the header', () => {
    const bytes = safetensors(PEFT_TENSORS);
    expect(failure(() => inspectAdapter(bytes.subarray(0, bytes.length - 4), 'SAFETENSORS')).message).toMatch(/past the end/);
    expect(inspectAdapter(bytes, 'SAFETENSORS')).toMatchObject({ rank: 8, alpha: null, baseModel: null });
  });

  it('refuses a file that is not a tar, and entries that climb out of the archive', () => {
    expect(failure(() => tarFiles(Buffer.alloc(2048, 7))).field).toBe('tar');
    const root = mkdtempSync(path.join(dir, 'climb-'));
    writeFileSync(path.join(root, 'x.json'), '{}');
    const out = path.join(dir, 'climb.tar');
    execFileSync('tar', ['--format=ustar', '-cf', out, '-C', root, '--transform', 's,^,../,', 'x.json']);
    expect(failure(() => tarFiles(readFileSync(out))).message).toMatch(/not a relative path/);
  });
});
