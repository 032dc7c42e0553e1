/** Runs an engine adapter directly and records what it hands the agent. */
import { JobCancellation } from '../../../worker-agent/job-cancellation';
import type { Engine, EngineJob, EngineResult, EngineSink } from '../../../worker-agent/engines/engine';
import type { JobKind } from '../../../proto/worker/v1/index';

export interface EngineRun {
  readonly chunks: Buffer[];
  readonly outputs: Array<{ data: Buffer; contentType: string }>;
  readonly result?: EngineResult;
  readonly error?: unknown;
  /** All chunk bytes as text. */
  readonly text: string;
}

export function engineJob(body: unknown, overrides: Partial<EngineJob> = {}): EngineJob {
  const payload = body as { stream?: boolean; stream_options?: { include_usage?: boolean } };
  return {
    jobId: 'job_1',
    kind: 'JOB_KIND_CHAT_COMPLETION' as JobKind,
    body: Buffer.from(JSON.stringify(body)),
    stream: payload.stream === true,
    includeUsage: payload.stream_options?.include_usage === true,
    model: 'test-model',
    ...overrides,
  };
}

export async function runEngine(engine: Engine, job: EngineJob, cancellation = new JobCancellation(), onChunk?: (data: Buffer) => void): Promise<EngineRun> {
  const chunks: Buffer[] = [];
  const outputs: Array<{ data: Buffer; contentType: string }> = [];
  const sink: EngineSink = {
    chunk: (data) => { chunks.push(Buffer.from(data)); onChunk?.(data); return undefined; },
    output: (data, contentType) => { outputs.push({ data, contentType }); return undefined; },
  };
  try {
    const result = await engine.run(job, sink, cancellation);
    return { chunks, outputs, result, text: Buffer.concat(chunks).toString('utf8') };
  } catch (error) {
    return { chunks, outputs, error, text: Buffer.concat(chunks).toString('utf8') };
  }
}

/** Parses `data: {...}` SSE text into the JSON events (and `[DONE]` as the string). */
export function sseEvents(text: string): Array<Record<string, any> | '[DONE]'> {
  return text.split('\n\n').filter((event) => event.trim() !== '').map((event) => {
    const data = event.replace(/^data: ?/, '');
    return data === '[DONE]' ? '[DONE]' : JSON.parse(data);
  });
}

/** Concatenated delta contents (chat) or texts (completions) of one choice. */
export function streamedText(events: Array<Record<string, any> | '[DONE]'>, index = 0): string {
  return events
    .filter((event): event is Record<string, any> => event !== '[DONE]')
    .flatMap((event) => event.choices as Array<Record<string, any>>)
    .filter((choice) => choice.index === index)
    .map((choice) => choice.delta?.content ?? choice.text ?? '')
    .join('');
}
