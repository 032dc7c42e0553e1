/**
 * Tiny GGUF models for tests, written into a temporary directory at test time (nothing
 * binary is committed), and the token counts the tiny tokenizer gives, to check usage against.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { tinyGguf, tinyTokenCount, type TinyGgufOptions } from '../../../worker-agent/llama/tiny-gguf';

export interface ModelDirectory {
  readonly directory: string;
  /** Writes a model file (options as `tinyGguf`) or given bytes; returns its absolute path. */
  write(name: string, model?: TinyGgufOptions | Buffer): string;
  remove(): void;
}

export function modelDirectory(): ModelDirectory {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'tiny-gguf-'));
  return {
    directory,
    write(name, model = {}) {
      const file = path.join(directory, name);
      fs.writeFileSync(file, Buffer.isBuffer(model) ? model : tinyGguf(model));
      return file;
    },
    remove: () => fs.rmSync(directory, { recursive: true, force: true }),
  };
}

/** The model with one u32 metadata value replaced: `llama.attention.head_count = 0` makes llama.cpp abort (GGML_ASSERT) while loading. */
export function withU32(bytes: Buffer, key: string, value: number): Buffer {
  const copy = Buffer.from(bytes);
  const name = Buffer.from(key, 'utf8');
  const at = copy.indexOf(name);
  if (at === -1) throw new Error(`no metadata key ${key}`);
  // The key is followed by its u32 value type, then the value.
  copy.writeUInt32LE(value, at + name.length + 4);
  return copy;
}

/**
 * Prompt tokens of a chat on the tiny model: node-llama-cpp's ChatML rendering is
 * BOS, then `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`;
 * control tokens count one each, everything else one per UTF-8 byte.
 */
export function chatPromptTokens(messages: ReadonlyArray<{ role: string; content: string }>): number {
  const rendered = messages.map((message) => `<|im_start|>${message.role}\n${message.content}<|im_end|>\n`).join('') + '<|im_start|>assistant\n';
  return 1 + tinyTokenCount(rendered, true);
}
