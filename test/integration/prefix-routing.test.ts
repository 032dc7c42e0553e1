import OpenAI from 'openai';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { graphqlClient } from '../capacity/support/graphql-client';
import { waitFor } from '../support/test-server';
import { parsePrometheusText, sampleValue } from '../telemetry/support/prometheus-text';
import { llamaDeploymentForSuite } from '../llama/support/llama-deployment';

const CONTEXT_SIZE = 2048;

type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

/** A long system prompt of its own for each application: one token per byte on the tiny model, so ~600 tokens. */
function systemPrompt(application: string): string {
  const rule = (index: number) => `Rule ${index} of ${application}: answer briefly, cite the runbook section ${index * 7}, and never guess.`;
  return `You are the ${application} assistant. ${Array.from({ length: 8 }, (_, index) => rule(index + 1)).join(' ')}`;
}

/**
 * Prefix-aware routing on real llama.cpp replicas: two replicas of a deployment (each its own
 * agent process with the tiny GGUF), two conversations with long system prompts of their own.
 * Every turn of a conversation must reach the replica that served its first turn, where the
 * engine still holds the prompt: the second turn reports cached prompt tokens. Then the
 * deployment switches to round-robin over GraphQL and consecutive requests alternate.
 */
describe('prefix-aware routing across llama.cpp replicas', () => {
  const served = llamaDeploymentForSuite('tiny-routing.gguf', { contextSize: CONTEXT_SIZE, deployment: { minReplicas: 2, maxReplicas: 2 }, readyTimeoutMs: 30_000, timeoutMs: 45_000 });

  const records = () => served.test.server.controlPlane.dataSource.getRepository(UsageRecord);

  /** The replica that served the deployment's latest request: its usage record is the `count`-th. */
  async function servedBy(count: number, promptTokens: number): Promise<string> {
    await waitFor(async () => (await records().count({ where: { deploymentId: served.deployment.id } })) >= count, 5_000, `usage record ${count}`);
    const [latest] = await records().find({ where: { deploymentId: served.deployment.id }, order: { id: 'DESC' }, take: 1 });
    expect(latest.promptTokens).toBe(promptTokens);
    expect(latest.replicaId).toMatch(/^rep_/);
    return latest.replicaId!;
  }

  let requests = 0;
  /** One chat request, and the replica it ran on (requests are sent one at a time). */
  async function chat(messages: ChatMessage[], stream = false) {
    let usage: OpenAI.CompletionUsage | undefined;
    let answer = '';
    if (stream) {
      const chunks = await served.client.chat.completions.create({ model: served.modelId, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } });
      for await (const chunk of chunks) {
        answer += chunk.choices[0]?.delta?.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
    } else {
      const completion = await served.client.chat.completions.create({ model: served.modelId, messages, max_tokens: 12, temperature: 0 });
      answer = completion.choices[0].message.content ?? '';
      usage = completion.usage;
    }
    if (!usage) throw new Error('no usage in the answer');
    requests += 1;
    return { answer, usage, replicaId: await servedBy(requests, usage.prompt_tokens) };
  }

  const metrics = async () => parsePrometheusText(await (await fetch(`${served.test.url}/metrics`)).text());

  it('keeps each conversation on one replica, whose engine reuses the earlier turn', async () => {
    const replicas = served.test.server.controlPlane.dispatcher.connections(served.deployment.id).map((connection) => connection.replicaId);
    expect(new Set(replicas).size).toBe(2);
    const conversations = [
      { system: systemPrompt('billing'), first: 'How do I read my invoice?', next: 'And the tax line?', stream: false },
      { system: systemPrompt('deployments'), first: 'Why is my replica still loading?', next: 'How long does a restart take?', stream: true },
    ];
    const servedTurns: Array<{ turn1: string; turn2: string }> = [];
    for (const conversation of conversations) {
      const turn1: ChatMessage[] = [{ role: 'system', content: conversation.system }, { role: 'user', content: conversation.first }];
      const first = await chat(turn1);
      expect(first.usage.prompt_tokens).toBeGreaterThan(500);
      const turn2: ChatMessage[] = [...turn1, { role: 'assistant', content: first.answer }, { role: 'user', content: conversation.next }];
      const second = await chat(turn2, conversation.stream);
      expect(second.replicaId).toBe(first.replicaId);
      // The engine evaluated only what follows the first turn's prompt (at least).
      expect(second.usage.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
      expect(second.usage.prompt_tokens_details!.cached_tokens!).toBeGreaterThanOrEqual(first.usage.prompt_tokens - 1);
      expect(replicas).toContain(first.replicaId);
      servedTurns.push({ turn1: first.replicaId, turn2: second.replicaId });
    }
    // Both conversations may share a replica (2 replicas, 2 home replicas per application): only stickiness is asserted.
    const samples = await metrics();
    const decisions = (reason: string) => sampleValue(samples, 'inference_routing_decisions_total', { deployment: served.deployment.id, policy: 'prefix-aware', reason }) ?? 0;
    expect(decisions('prefix_hit') + decisions('prefix_cold')).toBe(4);
  });

  it('alternates replicas once the deployment is switched to round-robin', async () => {
    const graphql = graphqlClient(served.test.url, served.workspace.apiKey);
    const updated = await graphql('mutation($id: ID!) { updateDeployment(id: $id, input: {routingPolicy: "round-robin"}) { routingPolicy } }', { id: served.deployment.id });
    expect(updated.errors).toBeUndefined();
    expect(updated.data.updateDeployment).toEqual({ routingPolicy: 'round-robin' });
    const conversation: ChatMessage[] = [{ role: 'system', content: systemPrompt('billing') }, { role: 'user', content: 'How do I read my invoice?' }];
    const order: string[] = [];
    for (let index = 0; index < 4; index += 1) order.push((await chat(conversation)).replicaId);
    expect(new Set(order).size).toBe(2);
    for (let index = 1; index < order.length; index += 1) expect(order[index]).not.toBe(order[index - 1]);
    expect(sampleValue(await metrics(), 'inference_routing_decisions_total', { deployment: served.deployment.id, policy: 'round-robin', reason: 'round_robin' })).toBe(4);
  });
});
