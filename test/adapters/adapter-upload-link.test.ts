import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import OpenAI from 'openai';
import { uploadLinkPath } from '../../control-plane/batches/upload-link';
import { parseKey } from '../../control-plane/server-keys';
import { graphqlAs, type GraphQLAnswer } from '../security/support/security-client';
import { startTestServer, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { loraGguf } from './support/lora-files';

const LLAMA = 'meta-llama/Llama-3.1-8B-Instruct';
const LINK_FIELDS = 'url path fileId expiresAt bytes';
const ADAPTER_MAX_BYTES = 8_192;

/**
 * The console's upload of adapter weights without the console (docs/adapters.md#registering):
 * `createAdapterUploadLink` over GraphQL, then a PUT of the raw bytes with plain fetch or
 * node:http against a real server. The link is one-time (also when two PUTs race), bound to its
 * workspace, refused when tampered with or expired (403) and when the body is longer than
 * declared (413); a broken upload leaves no file createAdapter could use.
 */
describe('adapter upload links', () => {
  let server: TestServer;
  let owner: TestWorkspace;
  let other: TestWorkspace;
  let asOwner: ReturnType<typeof graphqlAs>;
  let asOther: ReturnType<typeof graphqlAs>;
  let llama: TestDeployment;
  let theirs: TestDeployment;
  const weights = loraGguf({ rank: 8 });

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
  const linkFor = async (bytes = weights.length, as = asOwner, deploymentId = llama.id, filename = 'support.gguf') => await as(
    `mutation($input: AdapterUploadLinkInput!) { createAdapterUploadLink(input: $input) { ${LINK_FIELDS} } }`, { input: { filename, bytes, deploymentId } });
  const link = async (bytes = weights.length) => data(await linkFor(bytes)).createAdapterUploadLink as { url: string; path: string; fileId: string; bytes: number };
  const put = async (url: string, body: Buffer) => {
    const response = await fetch(url, { method: 'PUT', body });
    return { status: response.status, body: await response.json() as any };
  };
  const createAdapter = (as: typeof asOwner, name: string, fileId: string) => as(
    'mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { id name rank format source sizeBytes } }', { input: { name, baseModel: LLAMA, fileId } });

  beforeAll(async () => {
    server = await startTestServer({ controlPlane: { adapters: { maxBytes: ADAPTER_MAX_BYTES } } });
    owner = await server.createWorkspace();
    other = await server.createWorkspace();
    asOwner = graphqlAs(server.url, owner.apiKey);
    asOther = graphqlAs(server.url, other.apiKey);
    llama = await server.createDeployment(owner, { modelId: LLAMA, provider: 'external' });
    theirs = await server.createDeployment(other, { modelId: LLAMA, provider: 'external' });
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  test('a PUT to the link creates the user_data file it named; createAdapter registers it; a second use is 409', async () => {
    const minted = await link();
    expect(minted.fileId).toMatch(/^file-[0-9a-f]{24}$/);
    expect(minted.url).toBe(`${server.server.gateway.publicUrl}${minted.path}`);
    expect(minted.path.startsWith(`/uploads/${minted.fileId}?`)).toBe(true);
    // The path alone is enough on this origin (what the console PUTs to).
    const stored = await put(`${server.url}${minted.path}`, weights);
    expect(stored).toEqual({ status: 201, body: expect.objectContaining({ id: minted.fileId, object: 'file', purpose: 'user_data', bytes: weights.length, filename: 'support.gguf' }) });

    const client = new OpenAI({ apiKey: owner.apiKey, baseURL: llama.baseUrl, maxRetries: 0 });
    expect(await client.files.retrieve(minted.fileId)).toMatchObject({ id: minted.fileId, purpose: 'user_data', bytes: weights.length });
    expect(Buffer.from(await (await client.files.content(minted.fileId)).arrayBuffer()).equals(weights)).toBe(true);
    const adapter = data(await createAdapter(asOwner, 'uploaded-bot', minted.fileId)).createAdapter;
    expect(adapter).toMatchObject({ name: 'uploaded-bot', rank: 8, format: 'GGUF', source: `file:${minted.fileId}`, sizeBytes: weights.length });

    const again = await put(minted.url, weights);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'upload_link_used', type: 'invalid_request_error' });
    expect(again.body.error.message).toContain(minted.fileId);
  });

  test('two PUTs racing on one link: exactly one creates the file, the other is 409', async () => {
    for (let round = 0; round < 3; round++) {
      const minted = await link();
      const answers = await Promise.all([put(minted.url, weights), put(minted.url, weights)]);
      expect(answers.map((answer) => answer.status).sort()).toEqual([201, 409]);
      expect(answers.find((answer) => answer.status === 409)!.body.error.code).toBe('upload_link_used');
    }
  });

  test('a tampered link is 403 whichever part changed; so is an expired one', async () => {
    const minted = await link();
    const tampered = (name: string, value: string) => {
      const url = new URL(minted.url);
      url.searchParams.set(name, value);
      return url.toString();
    };
    for (const url of [
      tampered('bytes', String(minted.bytes + 1)), tampered('workspace', other.workspaceId), tampered('deployment', theirs.id),
      tampered('filename', 'other.gguf'), tampered('expires', String(Math.floor(Date.now() / 1000) + 86_400)),
      tampered('signature', '0'.repeat(64)), tampered('signature', 'not hex'), minted.url.replace(minted.fileId, 'file-000000000000000000000000'),
    ]) {
      const answer = await put(url, weights);
      expect(answer.status).toBe(403);
      expect(answer.body.error).toMatchObject({ code: 'permission_denied', message: expect.stringContaining('not valid') });
    }
    // The untouched link still works: nothing above spent it.
    expect((await put(minted.url, weights)).status).toBe(201);

    // Signed with the server's own key, exactly as it signs, but a minute in the past.
    const key = parseKey(fs.readFileSync(path.join(server.dataDir, 'storage-signing.key'), 'utf8').trim(), 'storage-signing.key');
    const expired = uploadLinkPath(key, {
      fileId: 'file-0123456789abcdef01234567', workspaceId: owner.workspaceId, deploymentId: llama.id, filename: 'late.gguf', bytes: weights.length,
      expires: Math.floor(Date.now() / 1000) - 60,
    });
    const late = await put(`${server.url}${expired}`, weights);
    expect(late.status).toBe(403);
    expect(late.body.error.message).toMatch(/expired at .*ask for a new one/);
  });

  test('a body longer than declared is 413 and the link stays unspent; a link over the limits is refused naming bytes', async () => {
    const minted = await link(weights.length - 1);
    const tooLong = await put(minted.url, weights);
    expect(tooLong.status).toBe(413);
    expect(tooLong.body.error).toMatchObject({ code: 'body_too_large', param: 'content-length', message: expect.stringContaining(`${weights.length - 1} bytes`) });
    expect(refusal(await createAdapter(asOwner, 'never-stored', minted.fileId))).toEqual({ code: 'BAD_USER_INPUT', param: 'fileId' });
    // Refused by its headers, before the claim: the same link still takes a body of the declared size.
    expect((await put(minted.url, weights.subarray(0, weights.length - 1))).status).toBe(201);

    expect(refusal(await linkFor(ADAPTER_MAX_BYTES + 1))).toEqual({ code: 'BAD_USER_INPUT', param: 'bytes' });
    expect(refusal(await linkFor(0))).toEqual({ code: 'BAD_USER_INPUT', param: 'bytes' });
    expect(refusal(await linkFor(weights.length, asOwner, llama.id, 'x'.repeat(513)))).toEqual({ code: 'BAD_USER_INPUT', param: 'filename' });
  });

  test('a body without content-length (chunked) is refused naming it', async () => {
    const minted = await link();
    const answer = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const request = http.request(minted.url, { method: 'PUT', headers: { 'transfer-encoding': 'chunked' } }, (response) => {
        let text = '';
        response.on('data', (chunk) => { text += chunk; });
        response.on('end', () => resolve({ status: response.statusCode!, body: JSON.parse(text) }));
      });
      request.on('error', reject);
      request.end(weights);
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 'invalid_request', param: 'content-length' });
  });

  test('an upload cut half-way leaves no file createAdapter could use, and spends the link', async () => {
    const minted = await link();
    await new Promise<void>((resolve) => {
      const request = http.request(minted.url, { method: 'PUT', headers: { 'content-length': String(weights.length) } });
      request.on('error', () => resolve());
      request.write(weights.subarray(0, Math.floor(weights.length / 2)), () => setTimeout(() => { request.destroy(); resolve(); }, 100));
    });
    // Spent: the claim went in before the body was read.
    await waitFor(async () => (await put(minted.url, weights)).status === 409, 10_000, 'the cut upload to have claimed its link');
    const client = new OpenAI({ apiKey: owner.apiKey, baseURL: llama.baseUrl, maxRetries: 0 });
    await expect(client.files.retrieve(minted.fileId)).rejects.toMatchObject({ status: 404 });
    expect(refusal(await createAdapter(asOwner, 'half-written', minted.fileId))).toEqual({ code: 'BAD_USER_INPUT', param: 'fileId' });
    const listed = await client.files.list({ purpose: 'user_data' });
    expect(listed.data.map((file) => file.id)).not.toContain(minted.fileId);
  });

  test('workspace-bound: another workspace\'s deployment is unknown, and a file uploaded by its link is the link\'s workspace\'s only', async () => {
    expect(refusal(await linkFor(weights.length, asOwner, theirs.id))).toEqual({ code: 'NOT_FOUND', param: 'deploymentId' });
    const minted = data(await linkFor(weights.length, asOther, theirs.id)).createAdapterUploadLink;
    expect((await put(minted.url, weights)).status).toBe(201);
    expect(refusal(await createAdapter(asOwner, 'not-mine', minted.fileId))).toEqual({ code: 'BAD_USER_INPUT', param: 'fileId' });
    expect(data(await createAdapter(asOther, 'theirs', minted.fileId)).createAdapter.source).toBe(`file:${minted.fileId}`);
  });
});
