import * as grpc from '@grpc/grpc-js';
import { loadWorkerService, PROTOCOL_VERSION, type AdapterResidency, type AgentFrame, type Assign, type ControlFrame } from '../../proto/worker/v1';

/**
 * A test-side agent: a gRPC client speaking worker.v1 to a control plane, with no engine. It
 * says Hello with the LoRA slots it is given, heartbeats READY with the residency the test
 * sets, records every Assign, and answers each with a fixed chat completion. For tests of the
 * control plane's placement, where what matters is which replica a job reaches.
 */
export class FakeWorkerAgent {
  readonly assigns: Assign[] = [];
  replicaId = '';
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<AgentFrame, ControlFrame>;
  private adapters: AdapterResidency[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly welcomed: Promise<void>;

  constructor(address: string, joinToken: string, readonly agentId: string, options: { maxLoras: number; maxCpuLoras?: number; heartbeatMs?: number }) {
    const Service = loadWorkerService();
    this.client = new Service(address, grpc.credentials.createInsecure());
    this.call = (this.client as unknown as { Connect(): grpc.ClientDuplexStream<AgentFrame, ControlFrame> }).Connect();
    this.welcomed = new Promise((resolve, reject) => {
      this.call.on('data', (frame: ControlFrame) => {
        if (frame.welcome) {
          this.replicaId = frame.welcome.replicaId;
          this.heartbeat();
          this.timer = setInterval(() => this.heartbeat(), options.heartbeatMs ?? 100);
          resolve();
        } else if (frame.reject) reject(new Error(`rejected: ${frame.reject.code}`));
        for (const assign of frame.assign ? [frame.assign] : frame.assignBatch?.assigns ?? []) this.answer(assign);
      });
      this.call.on('error', () => {});
    });
    this.call.write({
      hello: {
        protocolVersion: PROTOCOL_VERSION, agentVersion: 'test', joinToken, gpus: [], engine: { kind: 'vllm', version: 'test' }, models: [],
        maxConcurrency: 4, agentId, priorityCapable: false, flowControl: false, preemptsBatchLines: false,
        maxLoras: options.maxLoras, maxCpuLoras: options.maxCpuLoras ?? 0, maxLoraRank: 64,
      },
    } as AgentFrame);
  }

  /** Resolves once the control plane welcomed it (its replica id is known). */
  async joined(): Promise<this> {
    await this.welcomed;
    return this;
  }

  /** What its next heartbeats report (sent at once too). */
  hold(adapters: Array<{ name: string; state: AdapterResidency['state'] }>): void {
    this.adapters = adapters.map((adapter) => ({ loadMs: 100, error: '', lastUsedUnixMs: Date.now(), ...adapter }));
    this.heartbeat();
  }

  private heartbeat(): void {
    this.call.write({ heartbeat: { inFlight: 0, queued: 0, engineHealth: 'ENGINE_HEALTH_READY', detail: '', adapters: this.adapters } } as unknown as AgentFrame);
  }

  private answer(assign: Assign): void {
    this.assigns.push(assign);
    const body = JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion', created: 0, model: 'fake', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
    this.call.write({ jobEvent: { jobId: assign.jobId, chunk: { data: Buffer.from(body) } } } as unknown as AgentFrame);
    this.call.write({ jobEvent: { jobId: assign.jobId, completed: { usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2, cachedTokens: 0 }, finishReason: 'stop' } } } as unknown as AgentFrame);
  }

  stop(): void {
    clearInterval(this.timer);
    this.call.end();
    this.client.close();
  }
}
