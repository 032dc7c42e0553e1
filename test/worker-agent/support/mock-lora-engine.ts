/**
 * A vLLM (or SGLang) with runtime LoRA updating, at the boundary we don't own: records the
 * agent's load and unload calls and the `model` of every chat request, answers 404 for a model
 * it does not hold (as vLLM does), names the requested model in its answers (JSON and every SSE
 * chunk), and serves /metrics with `vllm:lora_requests_info`.
 */
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

export interface LoraCall {
  readonly path: string;
  readonly body: { lora_name?: string; lora_path?: string };
}

export class MockLoraEngine {
  readonly loadCalls: LoraCall[] = [];
  readonly unloadCalls: LoraCall[] = [];
  /** `model` of every chat request, in arrival order. */
  readonly chatModels: string[] = [];
  readonly loaded = new Set<string>();
  /** Adapter names whose load answers 400 (wrong base, rank above --max-lora-rank, ...). */
  readonly refuse = new Set<string>();
  /** How long a load takes. */
  loadDelayMs = 0;
  /** False: started without runtime LoRA updating, its load and unload routes do not exist (FastAPI's 404). */
  runtimeLora = true;
  /** What a metrics scrape says runs; by default every adapter loaded. */
  running: string[] | null = null;

  private constructor(private readonly server: http.Server, readonly url: string, private readonly flavour: 'vllm' | 'sglang') {}

  static async start(flavour: 'vllm' | 'sglang' = 'vllm'): Promise<MockLoraEngine> {
    let engine!: MockLoraEngine;
    const server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => engine.answer(request, response, Buffer.concat(chunks).toString('utf8')));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    engine = new MockLoraEngine(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, flavour);
    return engine;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private answer(request: http.IncomingMessage, response: http.ServerResponse, text: string): void {
    const prefix = this.flavour === 'vllm' ? '/v1' : '';
    const json = (status: number, body: unknown) => response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (request.method === 'GET' && request.url === '/v1/models') {
      json(200, { object: 'list', data: [{ id: 'base-model', object: 'model', owned_by: this.flavour }, ...[...this.loaded].map((id) => ({ id, object: 'model', owned_by: this.flavour, parent: 'base-model' }))] });
      return;
    }
    if (request.method === 'GET' && request.url === '/metrics') {
      const running = this.running ?? [...this.loaded];
      response.writeHead(200, { 'content-type': 'text/plain' }).end([
        '# TYPE vllm:num_requests_running gauge',
        'vllm:num_requests_running{model_name="base-model"} 0',
        'vllm:num_requests_waiting{model_name="base-model"} 0',
        '# TYPE vllm:lora_requests_info gauge',
        // An older label set vLLM never removed: the newest value is the present one.
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="stale.r1",waiting_lora_adapters=""} 1.7e+09',
        `vllm:lora_requests_info{max_lora="2",running_lora_adapters="${running.join(',')}",waiting_lora_adapters=""} 1.8e+09`,
        '',
      ].join('\n'));
      return;
    }
    const body = JSON.parse(text || '{}') as Record<string, any>;
    if (!this.runtimeLora && /_lora_adapter$/.test(request.url ?? '')) {
      json(404, { detail: 'Not Found' });
      return;
    }
    if (request.url === `${prefix}/load_lora_adapter`) {
      this.loadCalls.push({ path: request.url, body });
      setTimeout(() => {
        if (this.refuse.has(body.lora_name)) json(400, { object: 'error', message: `Loading lora ${body.lora_name} failed: ${body.lora_path}/adapter_config.json: rank 128 above max_lora_rank`, code: 400 });
        else if (this.loaded.has(body.lora_name)) json(400, { object: 'error', message: `The lora adapter '${body.lora_name}' has already been loaded.`, code: 400 });
        else {
          this.loaded.add(body.lora_name);
          response.writeHead(200).end(`Success: LoRA adapter '${body.lora_name}' added successfully.`);
        }
      }, this.loadDelayMs);
      return;
    }
    if (request.url === `${prefix}/unload_lora_adapter`) {
      this.unloadCalls.push({ path: request.url, body });
      this.loaded.delete(body.lora_name);
      response.writeHead(200).end('Success');
      return;
    }
    if (request.url === '/v1/chat/completions') {
      this.chatModels.push(body.model);
      if (body.model !== 'base-model' && !this.loaded.has(body.model)) {
        json(404, { object: 'error', message: `The model \`${body.model}\` does not exist.`, type: 'NotFoundError', code: 404 });
        return;
      }
      const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
      if (!body.stream) {
        json(200, { id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: `from ${body.model}` }, finish_reason: 'stop' }], usage });
        return;
      }
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (extra: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: body.model, ...extra })}\n\n`;
      response.end(chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'from ' } }] })
        + chunk({ choices: [{ index: 0, delta: { content: body.model }, finish_reason: 'stop' }] })
        + chunk({ choices: [], usage }) + 'data: [DONE]\n\n');
      return;
    }
    json(404, { error: 'not found' });
  }
}
