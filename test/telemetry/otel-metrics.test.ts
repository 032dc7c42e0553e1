import OpenAI from 'openai';
import { openForSuite } from '../support/suite';
import { deploymentForSuite, waitFor } from '../support/test-server';
import { startOtlpReceiver, type ReceivedExport, type ReceivedPoint } from './support/otlp-receiver';

/**
 * The OpenTelemetry GenAI metrics of a whole server (real agents over real gRPC, real
 * PostgreSQL), configured by the standard OTEL_* variables and exported over OTLP/HTTP (JSON)
 * to an in-process receiver, the collector's stand-in.
 */
describe('OpenTelemetry GenAI metrics over OTLP/HTTP', () => {
  const receiver = openForSuite(startOtlpReceiver, (opened) => opened.close());
  const served = deploymentForSuite(() => ({
    env: {
      OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_METRIC_EXPORT_INTERVAL: '200', OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-token=otel%20test', OTEL_SERVICE_NAME: 'gateway-under-test',
    },
  }));

  it('exports request duration, first token, time per output token and token usage with the GenAI attributes', async () => {
    const plain = await served.client.chat.completions.create({ model: served.modelId, messages: [{ role: 'user', content: 'otel metrics please' }], max_tokens: 6 });
    const stream = await served.client.chat.completions.create({
      model: served.modelId, messages: [{ role: 'user', content: 'stream for otel' }], max_tokens: 6, stream: true, stream_options: { include_usage: true },
    });
    let streamUsage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) if (chunk.usage) streamUsage = chunk.usage;
    expect(streamUsage!.completion_tokens).toBeGreaterThanOrEqual(2);

    const attributes = {
      'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'gateway-under-test', 'gen_ai.request.model': served.modelId, 'inference.deployment': served.deployment.id,
    };
    const sorted = (record: Record<string, string>) => JSON.stringify(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
    const point = (received: ReceivedExport, name: string, extra: Record<string, string> = {}): ReceivedPoint | undefined =>
      received.histograms.get(name)?.find((candidate) => sorted(candidate.attributes) === sorted({ ...attributes, ...extra }));
    // Cumulative: the latest export holds both requests once the one after their settlement has gone out.
    let latest: ReceivedExport | undefined;
    await waitFor(() => {
      latest = receiver.exports.at(-1);
      return (latest && point(latest, 'gen_ai.server.request.duration')?.count === 2) ?? false;
    }, 30_000, 'an export with both requests');
    const received = latest!;
    expect(received.headers['x-collector-token']).toBe('otel test');
    expect(received.resource['service.name']).toBe('gateway-under-test');
    expect(received.resource['service.instance.id']).toBeTruthy();

    expect(point(received, 'gen_ai.server.request.duration')!.sum).toBeGreaterThan(0);
    expect(point(received, 'gen_ai.server.time_to_first_token')).toMatchObject({ count: 1 });
    expect(point(received, 'gen_ai.server.time_per_output_token')).toMatchObject({ count: 1 });
    expect(point(received, 'gen_ai.client.token.usage', { 'gen_ai.token.type': 'input' }))
      .toMatchObject({ count: 2, sum: plain.usage!.prompt_tokens + streamUsage!.prompt_tokens });
    expect(point(received, 'gen_ai.client.token.usage', { 'gen_ai.token.type': 'output' }))
      .toMatchObject({ count: 2, sum: plain.usage!.completion_tokens + streamUsage!.completion_tokens });
    // Only the four GenAI histograms, each with only attributes of the closed sets and resolved ids.
    expect([...received.histograms.keys()].sort()).toEqual([
      'gen_ai.client.token.usage', 'gen_ai.server.request.duration', 'gen_ai.server.time_per_output_token', 'gen_ai.server.time_to_first_token',
    ]);
  });
});
