import OpenAI from 'openai';
import { waitFor, deploymentForSuite } from '../support/test-server';
import { postChat } from '../support/chat';
import { parsePrometheusText, sampleValue, type Sample } from './support/prometheus-text';

const GENERATED_ID = /^req_[0-9a-f]{12}_[0-9a-z]+$/;

/** /metrics, /readyz and X-Request-Id on a whole server: real agents, real gRPC, real PostgreSQL. */
describe('telemetry on the serving path', () => {

  const scrape = async (): Promise<Sample[]> => {
    const response = await fetch(`${served.test.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parsePrometheusText(await response.text());
  };
  const value = (samples: Sample[], name: string, labels: Record<string, string>) => sampleValue(samples, name, labels) ?? 0;
  const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}, key = served.workspace.apiKey) => postChat(served.deployment.baseUrl, key, body, { headers });

  const served = deploymentForSuite();

  it('counts chat requests (plain, stream, 4xx) with their status, duration, first token and tokens', async () => {
    const before = await scrape();
    const plain = await served.client.chat.completions.create({ model: served.modelId, messages: [{ role: 'user', content: 'metrics please' }], max_tokens: 8 });
    const stream = await served.client.chat.completions.create({
      model: served.modelId, messages: [{ role: 'user', content: 'stream for metrics' }], max_tokens: 8, stream: true, stream_options: { include_usage: true },
    });
    let streamUsage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) if (chunk.usage) streamUsage = chunk.usage;
    expect((await chat({ model: 'not-this-model', messages: [{ role: 'user', content: 'x' }] })).status).toBe(400);
    expect((await chat({ messages: [] }, {}, 'sk-not-a-key')).status).toBe(401);

    const ok = { deployment: served.deployment.id, route: 'chat.completions', status: '200' };
    const delta = (after: Sample[], name: string, labels: Record<string, string>) => value(after, name, labels) - value(before, name, labels);
    let after: Sample[] = [];
    await waitFor(async () => {
      after = await scrape();
      return delta(after, 'inference_requests_total', ok) >= 2;
    }, 5_000, 'the two answered chat requests in /metrics');
    expect(delta(after, 'inference_requests_total', ok)).toBe(2);
    expect(delta(after, 'inference_requests_total', { deployment: served.deployment.id, route: 'chat.completions', status: '400' })).toBe(1);
    // A bad key is answered before any deployment is resolved: no deployment id in its labels.
    expect(delta(after, 'inference_requests_total', { deployment: 'none', route: 'chat.completions', status: '401' })).toBe(1);
    expect(delta(after, 'inference_request_duration_seconds_count', { route: 'chat.completions' })).toBe(4);
    expect(delta(after, 'inference_request_duration_seconds_sum', { route: 'chat.completions' })).toBeGreaterThan(0);
    expect(delta(after, 'inference_time_to_first_token_seconds_count', { route: 'chat.completions' })).toBe(1);
    const tokens = { deployment: served.deployment.id, model: served.modelId };
    expect(delta(after, 'inference_tokens_total', { ...tokens, kind: 'prompt' })).toBe(plain.usage!.prompt_tokens + streamUsage!.prompt_tokens);
    expect(delta(after, 'inference_tokens_total', { ...tokens, kind: 'completion' })).toBe(plain.usage!.completion_tokens + streamUsage!.completion_tokens);

    // Per deployment and model, from the pipeline's finished requests: both ran, the stream had a first token and tokens after it.
    const series = { deployment: served.deployment.id, model: served.modelId };
    expect(streamUsage!.completion_tokens).toBeGreaterThanOrEqual(2);
    expect(delta(after, 'inference_request_e2e_latency_seconds_count', series)).toBe(2);
    expect(delta(after, 'inference_request_e2e_latency_seconds_sum', series)).toBeGreaterThan(0);
    expect(delta(after, 'inference_request_time_to_first_token_seconds_count', series)).toBe(1);
    expect(delta(after, 'inference_request_time_per_output_token_seconds_count', series)).toBe(1);
    const finishedOk = after.filter((sample) => sample.name === 'inference_requests_finished_total' && sample.labels.deployment === served.deployment.id
      && sample.labels.outcome === 'succeeded' && sample.labels.error === 'none');
    const finishedBefore = before.filter((sample) => sample.name === 'inference_requests_finished_total' && sample.labels.deployment === served.deployment.id
      && sample.labels.outcome === 'succeeded');
    expect(finishedOk.reduce((sum, sample) => sum + sample.value, 0) - finishedBefore.reduce((sum, sample) => sum + sample.value, 0)).toBe(2);
    // The refused requests (400, 401) never reached the pipeline: no finished request of theirs.
    expect(after.filter((sample) => sample.name === 'inference_requests_finished_total' && sample.labels.outcome !== 'succeeded')).toEqual([]);
  });

  it('counts errors the Koa routes render, labelled by route and (once resolved) deployment', async () => {
    const before = await scrape();
    const image = await fetch(`${served.deployment.baseUrl}/images/generations`, {
      method: 'POST', headers: { authorization: `Bearer ${served.workspace.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'a cat' }),
    });
    expect(image.status).toBe(400);
    expect((await fetch(`${served.test.url}/no/such/path/${'x'.repeat(50)}`)).status).toBe(404);
    const after = await scrape();
    const delta = (labels: Record<string, string>) => value(after, 'inference_requests_total', labels) - value(before, 'inference_requests_total', labels);
    expect(delta({ deployment: served.deployment.id, route: 'images.generations', status: '400' })).toBe(1);
    expect(delta({ deployment: 'none', route: 'other', status: '404' })).toBe(1);
    // No raw path ever becomes a label value (`model` holds catalog ids, which have slashes: `org/name`).
    expect(after.some((sample) => Object.values(sample.labels).some((label) => label.includes('no/such/path')))).toBe(false);
    expect(after.filter((sample) => Object.entries(sample.labels).some(([name, label]) => name !== 'model' && label.includes('/')))).toEqual([]);
  });

  it('exposes queue depth and replicas per deployment, and the process metrics', async () => {
    const samples = await scrape();
    expect(sampleValue(samples, 'inference_queue_depth', { deployment: served.deployment.id })).toBe(0);
    expect(sampleValue(samples, 'inference_replicas', { deployment: served.deployment.id, state: 'Running' })).toBe(1);
    expect(sampleValue(samples, 'inference_process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('echoes a sane X-Request-Id and generates one otherwise, on answers, errors and streams', async () => {
    const messages = [{ role: 'user', content: 'trace me' }];
    const given = await chat({ messages, max_tokens: 2 }, { 'x-request-id': 'trace-0001' });
    expect(given.status).toBe(200);
    expect(given.headers.get('x-request-id')).toBe('trace-0001');
    await given.arrayBuffer();

    const first = await chat({ messages, max_tokens: 2 });
    const second = await chat({ messages, max_tokens: 2 }, { 'x-request-id': 'x'.repeat(129) });
    await Promise.all([first.arrayBuffer(), second.arrayBuffer()]);
    expect(first.headers.get('x-request-id')).toMatch(GENERATED_ID);
    expect(second.headers.get('x-request-id')).toMatch(GENERATED_ID);
    expect(second.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));

    const streamed = await chat({ messages, max_tokens: 4, stream: true }, { 'x-request-id': 'stream-trace' });
    expect(streamed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(streamed.headers.get('x-request-id')).toBe('stream-trace');
    expect(await streamed.text()).toContain('[DONE]');

    const fastLaneError = await chat({ messages }, { 'x-request-id': 'bad-key-trace' }, 'sk-wrong');
    expect(fastLaneError.status).toBe(401);
    expect(fastLaneError.headers.get('x-request-id')).toBe('bad-key-trace');
    // As in OpenAI's API, the id travels in the header, not in the error body.
    expect(JSON.stringify(await fastLaneError.json())).not.toContain('bad-key-trace');

    const koaError = await fetch(`${served.deployment.baseUrl}/audio/speech`, { method: 'POST', headers: { authorization: `Bearer ${served.workspace.apiKey}`, 'x-request-id': 'koa-trace' } });
    expect(koaError.status).toBe(404);
    expect(koaError.headers.get('x-request-id')).toBe('koa-trace');
    const models = await fetch(`${served.deployment.baseUrl}/models`, { headers: { authorization: `Bearer ${served.workspace.apiKey}` } });
    expect(models.status).toBe(200);
    expect(models.headers.get('x-request-id')).toMatch(GENERATED_ID);
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      expect((await fetch(`${served.test.url}${path}`)).headers.get('x-request-id')).toMatch(GENERATED_ID);
    }
    const graphql = await fetch(`${served.test.url}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'graphql-trace' }, body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(graphql.headers.get('x-request-id')).toBe('graphql-trace');
  });

  it('answers /readyz 200 naming each check, and keeps /healthz', async () => {
    const ready = await fetch(`${served.test.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { rate_limits: 'ok', database: 'ok', agent_server: 'ok', shutdown: 'ok' } });
    const health = await fetch(`${served.test.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
  });

  it('serves /metrics only to direct local clients when no token is set', async () => {
    const proxied = await fetch(`${served.test.url}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(proxied.status).toBe(403);
    expect((await proxied.json()).error.type).toBe('permission_error');
    expect((await fetch(`${served.test.url}/metrics`, { headers: { forwarded: 'for=203.0.113.9' } })).status).toBe(403);
    expect((await fetch(`${served.test.url}/metrics`, { method: 'POST' })).status).toBe(404);
  });
});
