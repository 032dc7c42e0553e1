import { createHash } from 'node:crypto';
import OpenAI, { toFile } from 'openai';
import { startTestServer, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlAs, subscribe, type GraphQLAnswer } from '../security/support/security-client';
import { loraGguf } from './support/lora-files';

const LLAMA = 'meta-llama/Llama-3.1-8B-Instruct';
const QWEN_BASE = 'Qwen/Qwen2.5-7B';
const ADAPTER_FIELDS = 'id name baseModel rank format source revision sha256 sizeBytes sharedWithGuests deleted deployments { id name }';

/**
 * The adapter resource over GraphQL (docs/adapters.md): registration from a Files API upload,
 * every bad input a BAD_USER_INPUT naming its field (never a 500), attach/detach against the
 * deployment's base model and LoRA settings, revisions, deletion, and another workspace's
 * adapters, files and deployments unknown (NOT_FOUND), including its subscription events.
 * Deployments are external (no agent): nothing here runs a request.
 */
describe('adapters over GraphQL', () => {
  let server: TestServer;
  let owner: TestWorkspace;
  let other: TestWorkspace;
  let asOwner: ReturnType<typeof graphqlAs>;
  let asOther: ReturnType<typeof graphqlAs>;
  let llama: TestDeployment;
  let qwen: TestDeployment;
  let theirs: TestDeployment;
  const files = {} as Record<'rank8' | 'rank16' | 'rank32' | 'qwenArch' | 'notAdapter' | 'tooBig' | 'batch' | 'theirs', string>;

  const upload = async (workspace: TestWorkspace, deployment: TestDeployment, bytes: Buffer, purpose: 'user_data' | 'batch' = 'user_data') => {
    const client = new OpenAI({ apiKey: workspace.apiKey, baseURL: deployment.baseUrl, maxRetries: 0 });
    return (await client.files.create({ file: await toFile(bytes, purpose === 'batch' ? 'lines.jsonl' : 'adapter.gguf'), purpose })).id;
  };
  const data = (answer: GraphQLAnswer) => {
    expect(answer.body.errors).toBeUndefined();
    return answer.body.data as Record<string, any>;
  };
  const refusal = (answer: GraphQLAnswer) => {
    expect(answer.status).not.toBe(500);
    expect(answer.body.errors).toHaveLength(1);
    const { code, param } = answer.body.errors![0].extensions;
    return { code, param };
  };
  const create = (as: typeof asOwner, input: Record<string, unknown>) => as(`mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { ${ADAPTER_FIELDS} } }`, { input });

  beforeAll(async () => {
    server = await startTestServer({ controlPlane: { adapters: { maxBytes: 4_096 } } });
    owner = await server.createWorkspace();
    other = await server.createWorkspace();
    asOwner = graphqlAs(server.url, owner.apiKey);
    asOther = graphqlAs(server.url, other.apiKey);
    llama = await server.createDeployment(owner, { modelId: LLAMA, provider: 'external' });
    qwen = await server.createDeployment(owner, { modelId: QWEN_BASE, provider: 'external' });
    theirs = await server.createDeployment(other, { modelId: LLAMA, provider: 'external' });
    files.rank8 = await upload(owner, llama, loraGguf({ rank: 8 }));
    files.rank16 = await upload(owner, llama, loraGguf({ rank: 16 }));
    files.rank32 = await upload(owner, llama, loraGguf({ rank: 32 }));
    files.qwenArch = await upload(owner, llama, loraGguf({ architecture: 'qwen2' }));
    files.notAdapter = await upload(owner, llama, loraGguf({ type: 'model' }));
    files.tooBig = await upload(owner, llama, Buffer.concat([loraGguf(), Buffer.alloc(5_000)]));
    files.batch = await upload(owner, llama, Buffer.from('{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}\n'), 'batch');
    files.theirs = await upload(other, theirs, loraGguf());
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  test('an adapter registered from a user_data upload: rank, format and checksum read from its bytes', async () => {
    const bytes = loraGguf({ rank: 8 });
    const created = data(await create(asOwner, { name: 'support-bot', baseModel: LLAMA, fileId: files.rank8, checksum: `sha256:${createHash('sha256').update(bytes).digest('hex')}` })).createAdapter;
    expect(created).toMatchObject({
      name: 'support-bot', baseModel: LLAMA, rank: 8, format: 'GGUF', source: `file:${files.rank8}`, revision: 1,
      sha256: createHash('sha256').update(bytes).digest('hex'), sizeBytes: bytes.length, sharedWithGuests: false, deleted: false, deployments: [],
    });
    expect(created.id).toMatch(/^ad_[0-9a-f]{24}$/);
    const read = data(await asOwner(`query($id: ID!) { adapter(id: $id) { ${ADAPTER_FIELDS} } }`, { id: created.id })).adapter;
    expect(read).toEqual(created);
    await asOwner('mutation($id: ID!) { deleteAdapter(id: $id) { id } }', { id: created.id });
  });

  test.each([
    ['a name with /', { name: 'org/bot', baseModel: LLAMA, fileId: 'rank8' }, 'name'],
    ['an empty name', { name: '', baseModel: LLAMA, fileId: 'rank8' }, 'name'],
    ['a name of 65 characters', { name: 'a'.repeat(65), baseModel: LLAMA, fileId: 'rank8' }, 'name'],
    ['an unknown base model', { name: 'x', baseModel: 'acme/none', fileId: 'rank8' }, 'baseModel'],
    ['an embedding model as base', { name: 'x', baseModel: 'BAAI/bge-large-en-v1.5', fileId: 'rank8' }, 'baseModel'],
    ['an image model as base', { name: 'x', baseModel: 'black-forest-labs/FLUX.1-schnell', fileId: 'rank8' }, 'baseModel'],
    ['no source', { name: 'x', baseModel: LLAMA }, 'fileId'],
    ['two sources', { name: 'x', baseModel: LLAMA, fileId: 'rank8', huggingFaceRepo: 'org/lora', rank: 8 }, 'huggingFaceRepo'],
    ['an unknown file', { name: 'x', baseModel: LLAMA, fileId: 'file-000000000000000000000000' }, 'fileId'],
    ['another workspace\'s file', { name: 'x', baseModel: LLAMA, fileId: 'theirs' }, 'fileId'],
    ['a batch input file', { name: 'x', baseModel: LLAMA, fileId: 'batch' }, 'fileId'],
    ['weights above ADAPTER_MAX_BYTES', { name: 'x', baseModel: LLAMA, fileId: 'tooBig' }, 'fileId'],
    ['a declared rank the weights do not have', { name: 'x', baseModel: LLAMA, fileId: 'rank8', rank: 16 }, 'rank'],
    ['a rank out of range', { name: 'x', baseModel: LLAMA, fileId: 'rank8', rank: 0 }, 'rank'],
    ['a checksum that does not match', { name: 'x', baseModel: LLAMA, fileId: 'rank8', checksum: 'a'.repeat(64) }, 'checksum'],
    ['a checksum that is no SHA-256', { name: 'x', baseModel: LLAMA, fileId: 'rank8', checksum: 'md5:abc' }, 'checksum'],
    ['a declared format the bytes are not', { name: 'x', baseModel: LLAMA, fileId: 'rank8', format: 'PEFT_TAR' }, 'format'],
    ['an unknown format', { name: 'x', baseModel: LLAMA, fileId: 'rank8', format: 'ONNX' }, 'format'],
    ['a GGUF adapter of another architecture', { name: 'x', baseModel: LLAMA, fileId: 'qwenArch' }, 'baseModel'],
    ['a GGUF file that is no adapter', { name: 'x', baseModel: LLAMA, fileId: 'notAdapter' }, 'fileId'],
    ['a Hugging Face repo without rank', { name: 'x', baseModel: LLAMA, huggingFaceRepo: 'org/lora' }, 'rank'],
    ['a malformed Hugging Face repo', { name: 'x', baseModel: LLAMA, huggingFaceRepo: 'https://evil/x', rank: 8 }, 'huggingFaceRepo'],
    ['a bucket key without its deployment', { name: 'x', baseModel: LLAMA, bucketKey: 'adapters/a.gguf' }, 'deploymentId'],
    ['a bucket of a deployment without one', { name: 'x', baseModel: LLAMA, bucketKey: 'adapters/a.gguf', deploymentId: 'llama' }, 'deploymentId'],
  ])('%s is BAD_USER_INPUT naming the field', async (_what, input, param) => {
    const named = { ...input } as Record<string, unknown>;
    if (typeof named.fileId === 'string' && named.fileId in files) named.fileId = files[named.fileId as keyof typeof files];
    if (named.deploymentId === 'llama') named.deploymentId = llama.id;
    expect(refusal(await create(asOwner, named))).toEqual({ code: 'BAD_USER_INPUT', param });
    expect(data(await asOwner('{ adapters { id } }')).adapters).toEqual([]);
  });

  test('a Hugging Face adapter takes its declared rank; names are unique in a workspace, not across them', async () => {
    const hf = data(await create(asOwner, { name: 'hf-bot', baseModel: LLAMA, huggingFaceRepo: 'acme/llama-lora@v2', rank: 32 })).createAdapter;
    expect(hf).toMatchObject({ format: 'HUGGING_FACE', rank: 32, source: 'hf:acme/llama-lora@v2', sha256: null, sizeBytes: null });
    expect(refusal(await create(asOwner, { name: 'hf-bot', baseModel: LLAMA, fileId: files.rank8 }))).toEqual({ code: 'BAD_USER_INPUT', param: 'name' });
    const theirsToo = data(await create(asOther, { name: 'hf-bot', baseModel: LLAMA, fileId: files.theirs })).createAdapter;
    expect(theirsToo.id).not.toBe(hf.id);
    await asOwner('mutation($id: ID!) { deleteAdapter(id: $id) { id } }', { id: hf.id });
    await asOther('mutation($id: ID!) { deleteAdapter(id: $id) { id } }', { id: theirsToo.id });
  });

  test('attach needs the same base, room for the rank and adapter slots; detach, revisions, sharing and delete', async () => {
    const adapter = data(await create(asOwner, { name: 'rank16', baseModel: LLAMA, fileId: files.rank16 })).createAdapter;
    const attach = (deploymentId: string, as = asOwner, adapterId = adapter.id) => as(
      `mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { ${ADAPTER_FIELDS} } }`, { a: adapterId, d: deploymentId });
    const setLora = (input: Record<string, number>) => asOwner('mutation($id: ID!, $input: UpdateDeploymentInput!) { updateDeployment(id: $id, input: $input) { maxLoras maxCpuLoras maxLoraRank } }', { id: llama.id, input });

    expect(refusal(await attach(qwen.id))).toEqual({ code: 'BAD_USER_INPUT', param: 'deploymentId' });
    expect(data(await setLora({ maxLoraRank: 8 })).updateDeployment).toEqual({ maxLoras: 4, maxCpuLoras: 0, maxLoraRank: 8 });
    expect(refusal(await attach(llama.id))).toEqual({ code: 'BAD_USER_INPUT', param: 'deploymentId' });
    data(await setLora({ maxLoraRank: 64, maxLoras: 0 }));
    expect(refusal(await attach(llama.id))).toEqual({ code: 'BAD_USER_INPUT', param: 'deploymentId' });
    data(await setLora({ maxLoras: 2 }));
    expect(refusal(await attach(theirs.id))).toEqual({ code: 'NOT_FOUND', param: 'deploymentId' });
    expect(refusal(await attach(llama.id, asOwner, 'ad_000000000000000000000000'))).toEqual({ code: 'NOT_FOUND', param: 'adapterId' });

    const attached = data(await attach(llama.id)).attachAdapter;
    expect(attached.deployments).toEqual([{ id: llama.id, name: llama.slug }]);
    expect(data(await attach(llama.id)).attachAdapter.deployments).toHaveLength(1);
    expect(data(await asOwner('query($d: ID!) { adapters(deploymentId: $d) { name } }', { d: llama.id })).adapters).toEqual([{ name: 'rank16' }]);
    expect(data(await asOwner('query($d: ID!) { adapters(deploymentId: $d) { name } }', { d: qwen.id })).adapters).toEqual([]);

    // Settings that would fail every load of an attached adapter are refused, naming the field and the adapter; the deployment is unchanged.
    const lowered = await setLora({ maxLoraRank: 8 });
    expect(refusal(lowered)).toEqual({ code: 'BAD_USER_INPUT', param: 'maxLoraRank' });
    expect(lowered.body.errors![0].message).toMatch(/rank 16 of attached adapter "rank16"/);
    const noSlots = await setLora({ maxLoras: 0 });
    expect(refusal(noSlots)).toEqual({ code: 'BAD_USER_INPUT', param: 'maxLoras' });
    expect(noSlots.body.errors![0].message).toMatch(/adapter "rank16" is attached/);
    expect(data(await asOwner('query($id: ID!) { deployment(id: $id) { maxLoras maxLoraRank } }', { id: llama.id })).deployment).toEqual({ maxLoras: 2, maxLoraRank: 64 });
    // Down to the adapter's own rank is fine; new weights above the deployment's rank are refused.
    const update = (fileId: string) => asOwner(`mutation($id: ID!, $input: AdapterWeightsInput!) { updateAdapterWeights(id: $id, input: $input) { ${ADAPTER_FIELDS} } }`,
      { id: adapter.id, input: { fileId } });
    expect(data(await setLora({ maxLoraRank: 16 })).updateDeployment.maxLoraRank).toBe(16);
    expect(refusal(await update(files.rank32))).toEqual({ code: 'BAD_USER_INPUT', param: 'rank' });
    data(await setLora({ maxLoraRank: 64 }));
    const revised = data(await update(files.rank8)).updateAdapterWeights;
    expect(revised).toMatchObject({ revision: 2, rank: 8, source: `file:${files.rank8}`, deployments: [{ id: llama.id, name: llama.slug }] });
    expect(revised.sha256).not.toBe(adapter.sha256);
    expect(refusal(await update(files.notAdapter))).toEqual({ code: 'BAD_USER_INPUT', param: 'fileId' });
    expect(data(await asOwner('query($id: ID!) { adapter(id: $id) { revision } }', { id: adapter.id })).adapter.revision).toBe(2);

    expect(data(await asOwner('mutation($id: ID!) { setAdapterSharing(id: $id, shared: true) { sharedWithGuests } }', { id: adapter.id })).setAdapterSharing)
      .toEqual({ sharedWithGuests: true });
    const detach = () => asOwner('mutation($a: ID!, $d: ID!) { detachAdapter(adapterId: $a, deploymentId: $d) { deployments { id } } }', { a: adapter.id, d: llama.id });
    expect(data(await detach()).detachAdapter.deployments).toEqual([]);
    expect(refusal(await detach())).toEqual({ code: 'BAD_USER_INPUT', param: 'deploymentId' });

    expect(data(await asOwner('mutation($id: ID!) { deleteAdapter(id: $id) { id deleted } }', { id: adapter.id })).deleteAdapter).toEqual({ id: adapter.id, deleted: true });
    expect(refusal(await asOwner('query($id: ID!) { adapter(id: $id) { id } }', { id: adapter.id }))).toEqual({ code: 'NOT_FOUND', param: 'id' });
    // The name is free again.
    const again = data(await create(asOwner, { name: 'rank16', baseModel: LLAMA, fileId: files.rank16 })).createAdapter;
    await asOwner('mutation($id: ID!) { deleteAdapter(id: $id) { id } }', { id: again.id });
  });

  test('deployment LoRA settings: bad values are BAD_USER_INPUT naming the field', async () => {
    const update = (input: Record<string, number>) => asOwner('mutation($id: ID!, $input: UpdateDeploymentInput!) { updateDeployment(id: $id, input: $input) { maxLoras } }', { id: llama.id, input });
    expect(refusal(await update({ maxLoraRank: 48 }))).toEqual({ code: 'BAD_USER_INPUT', param: 'maxLoraRank' });
    expect(refusal(await update({ maxLoras: -1 }))).toEqual({ code: 'BAD_USER_INPUT', param: 'maxLoras' });
    expect(refusal(await update({ maxCpuLoras: 5000 }))).toEqual({ code: 'BAD_USER_INPUT', param: 'maxCpuLoras' });
    const created = await asOwner('mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { id } } }', {
      input: { modelId: LLAMA, priceCapPerHour: 1, provider: 'external', maxLoras: 1000 },
    });
    expect(refusal(created)).toEqual({ code: 'BAD_USER_INPUT', param: 'maxLoras' });
  });

  test('another workspace\'s adapter is NOT_FOUND everywhere, and its events never reach this workspace', async () => {
    const mineEvents = subscribe(server.url, `Bearer ${owner.apiKey}`, 'subscription { adapterUpdated { id name revision deleted } }');
    const otherEvents = subscribe(server.url, `Bearer ${other.apiKey}`, 'subscription { adapterUpdated { id name revision deleted } }');
    await Promise.all([mineEvents.ready, otherEvents.ready]);
    try {
      const adapter = data(await create(asOwner, { name: 'private-bot', baseModel: LLAMA, fileId: files.rank8 })).createAdapter;
      data(await asOwner('mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: adapter.id, d: llama.id }));
      const asThem = [
        ['adapter', asOther('query($id: ID!) { adapter(id: $id) { id } }', { id: adapter.id }), 'id'],
        ['attach to their deployment', asOther('mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: adapter.id, d: theirs.id }), 'adapterId'],
        ['detach', asOther('mutation($a: ID!, $d: ID!) { detachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: adapter.id, d: llama.id }), 'adapterId'],
        ['new weights', asOther('mutation($id: ID!, $f: String!) { updateAdapterWeights(id: $id, input: {fileId: $f}) { id } }', { id: adapter.id, f: files.theirs }), 'id'],
        ['sharing', asOther('mutation($id: ID!) { setAdapterSharing(id: $id, shared: true) { id } }', { id: adapter.id }), 'id'],
        ['delete', asOther('mutation($id: ID!) { deleteAdapter(id: $id) { id } }', { id: adapter.id }), 'id'],
        ['adapters of the owner\'s deployment', asOther('query($d: ID!) { adapters(deploymentId: $d) { id } }', { d: llama.id }), 'deploymentId'],
      ] as const;
      for (const [what, answer, param] of asThem) {
        const got = await answer;
        expect({ what, ...refusal(got) }).toEqual({ what, code: 'NOT_FOUND', param });
        expect(got.text).not.toContain('private-bot');
      }
      expect(data(await asOther('{ adapters { id } }')).adapters).toEqual([]);
      expect(data(await asOwner('query($id: ID!) { adapter(id: $id) { revision sharedWithGuests deployments { id } } }', { id: adapter.id })).adapter)
        .toEqual({ revision: 1, sharedWithGuests: false, deployments: [{ id: llama.id }] });
      data(await asOwner('mutation($id: ID!) { deleteAdapter(id: $id) { id } }', { id: adapter.id }));
      await waitFor(() => mineEvents.events.length >= 3, 5_000, 'the owner\'s three adapter events');
      expect(mineEvents.events.map((event) => [event.adapterUpdated.name, event.adapterUpdated.deleted])).toEqual([
        ['private-bot', false], ['private-bot', false], ['private-bot', true],
      ]);
      expect(otherEvents.events).toEqual([]);
      expect(otherEvents.errors).toEqual([]);
    } finally {
      mineEvents.stop();
      otherEvents.stop();
    }
  });
});
