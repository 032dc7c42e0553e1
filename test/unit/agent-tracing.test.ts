/**
 * The agent's side of a trace: a job whose Assign carries a traceparent gets the agent's span
 * (its child), the engine call a span under that, and the engine the call span's context; a job
 * that waited for a slot reports its start. With the agent's tracing off, the Assign's context
 * goes on to the engine unchanged (the engine can still join the server's trace), and with the
 * server's off there is none to pass.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import type { Assign, JobEvent } from '../../proto/worker/v1/index';
import { readTracingSettings } from '../../common/tracing/otel-settings';
import { Tracing } from '../../common/tracing/tracing';
import { silentLogger } from '../../worker-agent/agent-logger';
import type { Engine, EngineJob, EngineResult } from '../../worker-agent/engines/engine';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { OpenAiEngine } from '../../worker-agent/engines/openai-engine';
import type { EventWriter } from '../../worker-agent/event-writer';
import { JobCancellation } from '../../worker-agent/job-cancellation';
import { JobRunner } from '../../worker-agent/job-runner';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
const RESULT: EngineResult = { usage: { promptTokens: 7, completionTokens: 3, totalTokens: 10, cachedTokens: 4 }, finishReason: 'stop', usageEstimated: false, responseId: 'chatcmpl-1' };

function gatedEngine(url = '') {
  const calls: EngineJob[] = [];
  const pending: Array<{ resolve: (result: EngineResult) => void; reject: (error: unknown) => void }> = [];
  const engine = {
    kind: 'openai', version: '1', url, priorityCapable: false,
    start: async () => {}, models: () => [], health: () => ({ status: 'ENGINE_HEALTH_HEALTHY' as const, detail: '' }), close: async () => {},
    run: (job: EngineJob) => new Promise<EngineResult>((resolve, reject) => {
      calls.push(job);
      pending.push({ resolve, reject });
    }),
  } satisfies Engine;
  return { engine, calls, pending };
}

function harness(traced: boolean) {
  const exporter = new InMemorySpanExporter();
  const tracing = traced ? Tracing.start(readTracingSettings({ OTEL_TRACES_EXPORTER: 'otlp' }, 'agent')!, 'agent', {}, new SimpleSpanProcessor({ exporter })) : null;
  const fake = gatedEngine('http://engine:8000');
  const runner = new JobRunner(fake.engine, 1, silentLogger, Date.now, tracing);
  runner.setReplica('rep_1');
  const events: JobEvent[] = [];
  const writer = { send: (event: JobEvent) => { events.push(event); return undefined; } } as unknown as EventWriter;
  return { runner, writer, events, exporter, ...fake };
}

function assign(jobId: string, traceparent?: string): Assign {
  return {
    jobId, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: 0, stream: false, includeUsage: false, model: 'org/model',
    body: Buffer.from('{"messages":[]}'), ...(traceparent ? { traceparent } : {}),
  };
}

const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('the agent\'s spans of a job', () => {
  test('the job\'s span under the sender\'s, the engine call\'s under it, and the engine gets the call\'s context', async () => {
    const { runner, writer, exporter, calls, pending } = harness(true);
    runner.assign(assign('job_1', PARENT), writer);
    expect(calls[0].traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
    pending[0].resolve(RESULT);
    await settled();
    const [call, job] = exporter.getFinishedSpans();
    expect(job.name).toBe('agent job');
    expect(job.kind).toBe(SpanKind.SERVER);
    expect(job.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(job.attributes).toMatchObject({
      'inference.job.id': 'job_1', 'inference.replica.id': 'rep_1', 'gen_ai.request.model': 'org/model', 'gen_ai.operation.name': 'chat',
      'gen_ai.usage.input_tokens': 7, 'gen_ai.usage.output_tokens': 3, 'gen_ai.usage.cache_read.input_tokens': 4, 'gen_ai.response.finish_reasons': ['stop'],
    });
    expect(call.name).toBe('engine chat');
    expect(call.kind).toBe(SpanKind.CLIENT);
    expect(call.parentSpanContext?.spanId).toBe(job.spanContext().spanId);
    expect(calls[0].traceparent).toBe(`00-${TRACE_ID}-${call.spanContext().spanId}-01`);
    expect(call.attributes).toMatchObject({ 'gen_ai.response.id': 'chatcmpl-1', 'server.address': 'http://engine:8000', 'gen_ai.usage.cache_read.input_tokens': 4 });
  });

  test('a job that waited: accepted{queued} at once, accepted{started} when its engine call begins; a failed call is an error span', async () => {
    const { runner, writer, events, exporter, calls, pending } = harness(true);
    runner.assign(assign('first', PARENT), writer);
    runner.assign(assign('second', PARENT), writer);
    expect(events.filter((event) => event.accepted)).toEqual([{ jobId: 'second', accepted: { queued: true } }]);
    pending[0].reject(new EngineFailure('engine_error', 'the engine broke'));
    await settled();
    expect(events.filter((event) => event.accepted)).toEqual([{ jobId: 'second', accepted: { queued: true } }, { jobId: 'second', accepted: { queued: false } }]);
    expect(calls.map((call) => call.jobId)).toEqual(['first', 'second']);
    const failed = exporter.getFinishedSpans().filter((span) => span.status.code === SpanStatusCode.ERROR).map((span) => [span.name, span.attributes['error.type']]);
    expect(failed).toEqual([['engine chat', 'engine_error'], ['agent job', 'engine_error']]);
  });

  test('a job that starts at once sends no accepted frame', () => {
    const { runner, writer, events } = harness(true);
    runner.assign(assign('only', PARENT), writer);
    expect(events).toEqual([]);
  });

  test('with the agent\'s tracing off, the server\'s context goes to the engine as it came, and no span is made', () => {
    const { runner, writer, calls, exporter } = harness(false);
    runner.assign(assign('job_1', PARENT), writer);
    expect(calls[0].traceparent).toBe(PARENT);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  test('a job of an unsampled trace: no span, its context goes on to the engine as it came', () => {
    const { runner, writer, calls, exporter } = harness(true);
    const unsampled = `00-${TRACE_ID}-00f067aa0ba902b7-00`;
    runner.assign(assign('job_1', unsampled), writer);
    expect(calls[0].traceparent).toBe(unsampled);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  test('an untraced job (the server\'s tracing off): no span, nothing for the engine', () => {
    const { runner, writer, calls, exporter } = harness(true);
    runner.assign(assign('job_1'), writer);
    expect(calls[0].traceparent).toBeUndefined();
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});

describe('the OpenAI engine\'s request', () => {
  test('carries the job\'s traceparent as a header, and none for an untraced job', async () => {
    const seen: Array<string | undefined> = [];
    const server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.url === '/v1/models') return void response.end(JSON.stringify({ data: [{ id: 'm', owned_by: 'vllm' }] }));
        seen.push(request.headers.traceparent as string | undefined);
        response.setHeader('content-type', 'application/json');
        response.end(JSON.stringify({ id: 'c', choices: [{ index: 0, message: { content: 'x' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const engine = new OpenAiEngine({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: 2, connectTimeoutMs: 1_000, healthIntervalMs: 60_000, metricsPath: null });
    try {
      const sink = { chunk: () => undefined, output: () => undefined };
      const job = (traceparent?: string): EngineJob => ({
        jobId: 'j', kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from('{"messages":[]}'), stream: false, includeUsage: false, model: 'm', ...(traceparent ? { traceparent } : {}),
      });
      await engine.run(job(PARENT), sink, new JobCancellation());
      await engine.run(job(), sink, new JobCancellation());
      expect(seen).toEqual([PARENT, undefined]);
    } finally {
      await engine.close();
      server.close();
    }
  });
});
