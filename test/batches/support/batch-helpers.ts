import OpenAI, { toFile } from 'openai';
import type { Batch } from 'openai/resources/batches';

/** One line of an input file. */
export interface InputLine {
  custom_id: string;
  method: string;
  url: string;
  body: Record<string, unknown>;
}

export function chatLine(customId: string, content: string, extra: Record<string, unknown> = {}): InputLine {
  return { custom_id: customId, method: 'POST', url: '/v1/chat/completions', body: { messages: [{ role: 'user', content }], max_tokens: 8, ...extra } };
}

export function jsonl(lines: unknown[]): Buffer {
  return Buffer.from(`${lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n')}\n`);
}

export async function upload(client: OpenAI, data: Buffer, name = 'in.jsonl'): Promise<string> {
  const file = await client.files.create({ file: await toFile(data, name), purpose: 'batch' });
  return file.id;
}

const TERMINAL = new Set(['completed', 'failed', 'expired', 'cancelled']);

/** Polls the batch until it is terminal (or `until` says so). */
export async function waitForBatch(client: OpenAI, id: string, timeoutMs = 30_000, until: (batch: Batch) => boolean = (batch) => TERMINAL.has(batch.status)): Promise<Batch> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const batch = await client.batches.retrieve(id);
    if (until(batch)) return batch;
    if (Date.now() > deadline) throw new Error(`batch ${id} is still ${batch.status} (${JSON.stringify(batch.request_counts)}) after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A file's lines, parsed; [] for no file. */
export async function fileLines(client: OpenAI, id: string | null | undefined): Promise<Array<Record<string, any>>> {
  if (!id) return [];
  const text = await (await client.files.content(id)).text();
  return text.split('\n').filter((line) => line.length > 0).map((line) => JSON.parse(line));
}

export interface Answer {
  status: number;
  json: any;
  text: string;
  headers: Headers;
}

/** A raw call (bad input the SDK would not send). */
export async function call(method: string, url: string, key: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${key}`, ...headers } };
  if (body instanceof FormData) init.body = body;
  else if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] = 'application/json';
  }
  const response = await fetch(url, init);
  const text = await response.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: response.status, json, text, headers: response.headers };
}
