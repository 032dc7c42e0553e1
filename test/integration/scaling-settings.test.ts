import { serverForSuite, type TestWorkspace } from '../support/test-server';
import { graphqlClient, OPERATOR_TOKEN } from '../capacity/support/graphql-client';

type Client = ReturnType<typeof graphqlClient>;
/** [what is sent, the input, expected param, what the message must say] */
type Case = [string, Record<string, unknown>, string, RegExp];

const CHAT = 'meta-llama/Llama-3.1-8B-Instruct';
const IMAGE = 'black-forest-labs/FLUX.1-schnell';
const EMBEDDING = 'BAAI/bge-large-en-v1.5';
/** A chat model whose stated service figures make an idle replica take 400 ms to its first token (2,000 prompt tokens at 5,000/s). */
const SLOW_PREFILL = {
  id: 'test/slow-prefill', name: 'Slow prefill (tests)', modality: 'text', task: 'chat', engine: 'vllm', official: false,
  gpuMemoryGb: 24, inputModalities: ['text'], sizes: [], targetConcurrency: 8,
  service: { prefillTokensPerSecond: 5_000, decodeTokensPerSecond: 40, meanPromptTokens: 2_000, meanOutputTokens: 200 },
};

const FIELDS = 'id scalingPolicy slo { ttftP95Ms tpotP95Ms queueWaitP95Ms } scaleToZeroAfterSeconds coldStartQueueLimit minReplicas maxReplicas';
const CREATE = `mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { ${FIELDS} } } }`;
const UPDATE = `mutation($id: ID!, $input: UpdateDeploymentInput!) { updateDeployment(id: $id, input: $input) { ${FIELDS} } }`;

/**
 * A deployment's autoscaling settings (issue 39): the policy, the SLO, scale to zero and its
 * queue, on create and update. Every bad value is BAD_USER_INPUT naming the field and what is
 * allowed; the deployment is unchanged by a refused update. Deployments are `external` so no
 * agent starts: only the settings are under test.
 */
describe('autoscaling settings of a deployment', () => {
  const test = serverForSuite({ controlPlane: { operatorToken: OPERATOR_TOKEN } });
  let workspace: TestWorkspace;
  let graphql: Client;

  beforeAll(async () => {
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
    const registered = await graphqlClient(test.url, OPERATOR_TOKEN)('mutation($spec: JSONObject!) { registerCatalogModel(spec: $spec) { id } }', { spec: SLOW_PREFILL });
    expect(registered.errors).toBeUndefined();
  });

  const base = (modelId: string, more: Record<string, unknown> = {}) => ({ modelId, priceCapPerHour: 1, minReplicas: 1, maxReplicas: 2, provider: 'external', ...more });

  async function expectRefused(operation: (input: Record<string, unknown>) => Promise<Awaited<ReturnType<Client>>>, cases: Case[]): Promise<void> {
    const outcomes = [];
    for (const [label, input] of cases) {
      const result = await operation(input);
      outcomes.push({ label, data: result.data ?? null, error: result.errors?.[0] ?? null });
    }
    expect(outcomes).toEqual(cases.map(([label, , param, message]) => ({
      label, data: null,
      error: expect.objectContaining({ message: expect.stringMatching(message), extensions: expect.objectContaining({ code: 'BAD_USER_INPUT', param }) }),
    })));
  }

  it('creates with the defaults (concurrency, no SLO, never to zero, 100 waiting) and with every setting stated', async () => {
    const plain = await graphql(CREATE, { input: base(CHAT) });
    expect(plain.data.createDeployment.deployment).toMatchObject({
      scalingPolicy: 'CONCURRENCY', slo: null, scaleToZeroAfterSeconds: null, coldStartQueueLimit: 100,
    });
    const stated = await graphql(CREATE, {
      input: base(CHAT, { scalingPolicy: 'SLO', slo: { ttftP95Ms: 800, tpotP95Ms: 60 }, scaleToZeroAfterSeconds: 600, coldStartQueueLimit: 20 }),
    });
    expect(stated.data.createDeployment.deployment).toMatchObject({
      scalingPolicy: 'SLO', slo: { ttftP95Ms: 800, tpotP95Ms: 60, queueWaitP95Ms: null }, scaleToZeroAfterSeconds: 600, coldStartQueueLimit: 20,
    });
    const media = await graphql(CREATE, { input: base(IMAGE, { scalingPolicy: 'SLO', slo: { queueWaitP95Ms: 30_000 } }) });
    expect(media.data.createDeployment.deployment).toMatchObject({ scalingPolicy: 'SLO', slo: { ttftP95Ms: null, tpotP95Ms: null, queueWaitP95Ms: 30_000 } });
    // An SLO stated under the concurrency policy is kept: the console measures attainment against it either way.
    const measuredOnly = await graphql(CREATE, { input: base(CHAT, { slo: { ttftP95Ms: 2_000 } }) });
    expect(measuredOnly.data.createDeployment.deployment).toMatchObject({ scalingPolicy: 'CONCURRENCY', slo: { ttftP95Ms: 2_000 } });
  });

  it('refuses impossible SLOs, an SLO of the wrong kind, the slo policy without its target, and absurd scale-to-zero and queue settings', async () => {
    const create = (input: Record<string, unknown>) => graphql(CREATE, { input });
    await expectRefused(create, [
      ['slo policy without an SLO (chat)', base(CHAT, { scalingPolicy: 'SLO' }), 'slo.ttftP95Ms', /^scalingPolicy 'slo' needs slo\.ttftP95Ms/],
      ['slo policy with only TPOT (chat)', base(CHAT, { scalingPolicy: 'SLO', slo: { tpotP95Ms: 50 } }), 'slo.ttftP95Ms', /needs slo\.ttftP95Ms/],
      ['slo policy without queue wait (image)', base(IMAGE, { scalingPolicy: 'SLO' }), 'slo.queueWaitP95Ms', /needs slo\.queueWaitP95Ms/],
      ['slo policy on an embedding model', base(EMBEDDING, { scalingPolicy: 'SLO' }), 'scalingPolicy', /an embedding model\) states none: use 'concurrency'/],
      ['TTFT 10 ms', base(CHAT, { slo: { ttftP95Ms: 10 } }), 'slo.ttftP95Ms', /^slo\.ttftP95Ms must be an integer number of milliseconds from 50 to 3600000, got 10$/],
      ['TTFT 0', base(CHAT, { slo: { ttftP95Ms: 0 } }), 'slo.ttftP95Ms', /from 50 to 3600000, got 0$/],
      ['TTFT negative', base(CHAT, { slo: { ttftP95Ms: -5 } }), 'slo.ttftP95Ms', /from 50 to 3600000, got -5$/],
      ['TTFT over an hour', base(CHAT, { slo: { ttftP95Ms: 3_600_001 } }), 'slo.ttftP95Ms', /from 50 to 3600000, got 3600001$/],
      ['TTFT under an idle replica\'s prefill', base(SLOW_PREFILL.id, { slo: { ttftP95Ms: 300 } }), 'slo.ttftP95Ms',
        /from 400 to 3600000 \(an idle replica of 'test\/slow-prefill' takes 400 ms to prefill its mean prompt\), got 300$/],
      ['TPOT 1 ms', base(CHAT, { slo: { ttftP95Ms: 500, tpotP95Ms: 1 } }), 'slo.tpotP95Ms', /^slo\.tpotP95Ms must be an integer number of milliseconds from 5 to 60000, got 1$/],
      ['TPOT over a minute', base(CHAT, { slo: { tpotP95Ms: 60_001 } }), 'slo.tpotP95Ms', /from 5 to 60000, got 60001$/],
      ['queue wait on a chat model', base(CHAT, { slo: { queueWaitP95Ms: 1_000 } }), 'slo.queueWaitP95Ms',
        /^slo\.queueWaitP95Ms does not apply to 'meta-llama\/Llama-3\.1-8B-Instruct', a text model: its SLO states slo\.ttftP95Ms and slo\.tpotP95Ms$/],
      ['TTFT on an image model', base(IMAGE, { slo: { ttftP95Ms: 1_000 } }), 'slo.ttftP95Ms', /does not apply to 'black-forest-labs\/FLUX\.1-schnell', an image model: its SLO states slo\.queueWaitP95Ms$/],
      ['TPOT on an image model', base(IMAGE, { slo: { tpotP95Ms: 50 } }), 'slo.tpotP95Ms', /does not apply to .* its SLO states slo\.queueWaitP95Ms$/],
      ['TTFT on an embedding model', base(EMBEDDING, { slo: { ttftP95Ms: 500 } }), 'slo.ttftP95Ms', /an embedding model: it states no SLO$/],
      ['queue wait 50 ms', base(IMAGE, { slo: { queueWaitP95Ms: 50 } }), 'slo.queueWaitP95Ms', /from 100 to 3600000, got 50$/],
      ['queue wait over an hour', base(IMAGE, { slo: { queueWaitP95Ms: 4_000_000 } }), 'slo.queueWaitP95Ms', /from 100 to 3600000, got 4000000$/],
      ['scale to zero after -1 s', base(CHAT, { scaleToZeroAfterSeconds: -1 }), 'scaleToZeroAfterSeconds', /^scaleToZeroAfterSeconds must be an integer from 60 to 86400 \(or null: never\), got -1$/],
      ['scale to zero after 0 s', base(CHAT, { scaleToZeroAfterSeconds: 0 }), 'scaleToZeroAfterSeconds', /from 60 to 86400 \(or null: never\), got 0$/],
      ['scale to zero after 59 s', base(CHAT, { scaleToZeroAfterSeconds: 59 }), 'scaleToZeroAfterSeconds', /got 59$/],
      ['scale to zero after a day and a second', base(CHAT, { scaleToZeroAfterSeconds: 86_401 }), 'scaleToZeroAfterSeconds', /got 86401$/],
      ['cold-start queue 0', base(CHAT, { coldStartQueueLimit: 0 }), 'coldStartQueueLimit', /^coldStartQueueLimit must be an integer from 1 to 10000, got 0$/],
      ['cold-start queue -3', base(CHAT, { coldStartQueueLimit: -3 }), 'coldStartQueueLimit', /got -3$/],
      ['cold-start queue 10001', base(CHAT, { coldStartQueueLimit: 10_001 }), 'coldStartQueueLimit', /got 10001$/],
      ['max below min', base(CHAT, { minReplicas: 3, maxReplicas: 2 }), 'maxReplicas', /^maxReplicas must be an integer from minReplicas \(3\) to 64, got 2$/],
      ['min 0 (scale to zero is scaleToZeroAfterSeconds)', base(CHAT, { minReplicas: 0 }), 'minReplicas', /^minReplicas must be an integer from 1 to 64, got 0$/],
    ]);
    const listed = await graphql('{ deployments { id } }');
    // Only the four of the first test exist: no refused create left a row.
    expect(listed.data.deployments).toHaveLength(4);
  });

  it('an unknown policy name is refused by the schema, naming the value', async () => {
    const result = await graphql(CREATE, { input: base(CHAT, { scalingPolicy: 'FASTEST' }) });
    expect(result.data).toBeUndefined();
    expect(result.errors?.[0]).toMatchObject({
      message: expect.stringMatching(/"FASTEST" at "input\.scalingPolicy".*does not exist in "ScalingPolicy" enum/), extensions: { code: 'BAD_USER_INPUT' },
    });
  });

  it('updates: a field left out keeps its value, slo replaces the SLO, null turns scale to zero off; a bad update changes nothing', async () => {
    const created = await graphql(CREATE, { input: base(CHAT, { slo: { ttftP95Ms: 1_000, tpotP95Ms: 80 }, scaleToZeroAfterSeconds: 300 }) });
    const id = created.data.createDeployment.deployment.id;
    const update = (input: Record<string, unknown>) => graphql(UPDATE, { id, input });

    const toSlo = await update({ scalingPolicy: 'SLO' });
    expect(toSlo.data.updateDeployment).toMatchObject({ scalingPolicy: 'SLO', slo: { ttftP95Ms: 1_000, tpotP95Ms: 80 }, scaleToZeroAfterSeconds: 300, coldStartQueueLimit: 100 });
    const replaced = await update({ slo: { ttftP95Ms: 1_500 } });
    expect(replaced.data.updateDeployment).toMatchObject({ scalingPolicy: 'SLO', slo: { ttftP95Ms: 1_500, tpotP95Ms: null, queueWaitP95Ms: null } });
    const never = await update({ scaleToZeroAfterSeconds: null, coldStartQueueLimit: 7 });
    expect(never.data.updateDeployment).toMatchObject({ scaleToZeroAfterSeconds: null, coldStartQueueLimit: 7, slo: { ttftP95Ms: 1_500 } });

    await expectRefused(update, [
      ['clearing the SLO the slo policy needs', { slo: null }, 'slo.ttftP95Ms', /^scalingPolicy 'slo' needs slo\.ttftP95Ms/],
      ['an SLO without TTFT under the slo policy', { slo: { tpotP95Ms: 40 } }, 'slo.ttftP95Ms', /needs slo\.ttftP95Ms/],
      ['TTFT 49 ms', { slo: { ttftP95Ms: 49 } }, 'slo.ttftP95Ms', /from 50 to 3600000, got 49$/],
      ['queue wait on text', { slo: { ttftP95Ms: 500, queueWaitP95Ms: 500 } }, 'slo.queueWaitP95Ms', /does not apply/],
      ['scale to zero after 10 s', { scaleToZeroAfterSeconds: 10 }, 'scaleToZeroAfterSeconds', /from 60 to 86400/],
      ['cold-start queue 0', { coldStartQueueLimit: 0 }, 'coldStartQueueLimit', /from 1 to 10000/],
      ['max below min', { minReplicas: 2, maxReplicas: 1 }, 'maxReplicas', /from minReplicas \(2\) to 64/],
    ]);
    const after = await graphql(`query($id: ID!) { deployment(id: $id) { ${FIELDS} } }`, { id });
    expect(after.data.deployment).toEqual(never.data.updateDeployment);

    // Back to concurrency, the SLO may then be cleared.
    const back = await update({ scalingPolicy: 'CONCURRENCY', slo: null });
    expect(back.data.updateDeployment).toMatchObject({ scalingPolicy: 'CONCURRENCY', slo: null });
  });
});
