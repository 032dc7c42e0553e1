import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import sharp from 'sharp';
import { startS3rver, S3RVER_ACCESS_KEY_ID, S3RVER_SECRET_ACCESS_KEY, type TestS3 } from '../storage/start-s3rver';
import { startWithDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { MediaClient } from './support/media-client';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
const CUSTOMER_BUCKET = 'customer-renders';
const MANAGED_BUCKET = 'platform-outputs';

/** The destination table of docs/api-contract.md#output-destinations, against a real S3-compatible server (s3rver) and the local store. */
describe('output storage destinations', () => {
  let s3: TestS3;
  let test: TestServer;
  let workspace: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };
  let client: MediaClient;
  let bucketClient: S3Client;

  const graphql = async (query: string, variables: Record<string, unknown> = {}) => {
    const response = await fetch(`${test.url}/graphql`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
    });
    return (await response.json()) as { data?: any; errors?: Array<{ message: string; extensions: { code: string } }> };
  };
  const keysIn = async (bucket: string) => ((await bucketClient.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((object) => object.Key!);
  const createCredential = async (bucket = CUSTOMER_BUCKET) => {
    const created = await graphql(`mutation($input: CreateStorageCredentialInput!) { createStorageCredential(input: $input) { id status accessKeyId } }`, {
      input: { name: 'renders', endpoint: s3.endpoint, region: 'us-east-1', bucket, keyPrefix: 'gen/', accessKeyId: S3RVER_ACCESS_KEY_ID, secretAccessKey: S3RVER_SECRET_ACCESS_KEY },
    });
    return created.data.createStorageCredential as { id: number; status: string; accessKeyId: string };
  };

  beforeAll(async () => {
    s3 = await startS3rver([CUSTOMER_BUCKET, MANAGED_BUCKET]);
    bucketClient = new S3Client({
      endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: S3RVER_ACCESS_KEY_ID, secretAccessKey: S3RVER_SECRET_ACCESS_KEY },
    });
    // The customer bucket is s3rver on loopback, which the platform refuses by default.
    ({ test, workspace, deployment } = await startWithDeployment({ controlPlane: { storage: { allowPrivateEndpoints: true } }, deployment: { modelId: IMAGE_MODEL } }));
    client = new MediaClient(deployment.baseUrl, workspace.apiKey);
  });

  afterAll(async () => {
    bucketClient?.destroy();
    await test?.stop();
    await s3?.stop();
  });

  it('a customer bucket is created and verified through GraphQL; unverified ones are refused with 422', async () => {
    const credential = await createCredential();
    expect(credential).toMatchObject({ status: 'unverified', accessKeyId: `****${S3RVER_ACCESS_KEY_ID.slice(-4)}` });
    const unverified = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'x', size: '512x512', storage_credential_id: credential.id });
    expect(unverified.status).toBe(422);
    expect(unverified.body.error).toMatchObject({ code: 'storage_credential_not_verified', param: 'storage_credential_id' });
    const verified = await graphql('mutation($id: Int!) { verifyStorageCredential(id: $id) { id status statusMessage verifiedAt } }', { id: credential.id });
    expect(verified.data.verifyStorageCredential).toMatchObject({ status: 'verified', statusMessage: null });
    const broken = await createCredential('no-such-bucket');
    const failed = await graphql('mutation($id: Int!) { verifyStorageCredential(id: $id) { status statusMessage } }', { id: broken.id });
    expect(failed.data.verifyStorageCredential.status).toBe('failed');
    expect(failed.data.verifyStorageCredential.statusMessage).toMatch(/bucket/i);
  });

  it('url outputs go to the customer bucket and are signed for about 7 days; b64_json is returned inline and stored too', async () => {
    const credential = await createCredential();
    await graphql('mutation($id: Int!) { verifyStorageCredential(id: $id) { status } }', { id: credential.id });
    const withUrl = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'to my bucket', size: '512x512', storage_credential_id: credential.id });
    expect(withUrl.status).toBe(200);
    const link = new URL(withUrl.body.data[0].url);
    expect(link.origin).toBe(s3.endpoint);
    expect(link.searchParams.get('X-Amz-Expires')).toBe('604800');
    const fetched = Buffer.from(await (await fetch(link)).arrayBuffer());
    expect((await sharp(fetched).metadata()).format).toBe('png');

    const inline = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'inline and kept', size: '512x512', response_format: 'b64_json', storage_credential_id: credential.id });
    const [record] = (await client.get('/requests?limit=1')).body.data;
    expect(record).toMatchObject({ storage_provider: 's3', output_bucket: CUSTOMER_BUCKET, output_object_key: `${record.id}/0.png` });
    const stored = await bucketClient.send(new GetObjectCommand({ Bucket: CUSTOMER_BUCKET, Key: `gen/${record.id}/0.png` }));
    const storedBytes = Buffer.from(await stored.Body!.transformToByteArray());
    expect(storedBytes.equals(Buffer.from(inline.body.data[0].b64_json, 'base64'))).toBe(true);
    // Customer-bucket outputs are never scheduled for deletion.
    expect((await test.server.controlPlane.requestRecords.find(record.id))!.outputsExpireAt).toBeNull();
  });

  it("a deployment's default bucket applies when the request names none", async () => {
    const credential = await createCredential();
    await graphql('mutation($id: Int!) { verifyStorageCredential(id: $id) { status } }', { id: credential.id });
    const created = await graphql(`mutation($id: Int) { createDeployment(input: {modelId: "${IMAGE_MODEL}", priceCapPerHour: 2, storageCredentialId: $id}) { deployment { id slug storageCredentialId } } }`, { id: credential.id });
    const byDefault = created.data.createDeployment.deployment;
    expect(byDefault.storageCredentialId).toBe(credential.id);
    await test.waitForReplicas(byDefault.id, 1);
    const defaultClient = new MediaClient(`${test.url}/d/${byDefault.slug}/v1`, workspace.apiKey);
    const submitted = await defaultClient.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'default bucket', size: '512x512' });
    const record = await defaultClient.waitForRecord(submitted.body.id);
    expect(record).toMatchObject({ status: 'succeeded', storage_provider: 's3', output_bucket: CUSTOMER_BUCKET });
    expect(await keysIn(CUSTOMER_BUCKET)).toContain(`gen/${submitted.body.id}/0.png`);
    const textWithBucket = await graphql(`mutation($id: Int) { createDeployment(input: {modelId: "meta-llama/Llama-3.1-8B-Instruct", priceCapPerHour: 2, storageCredentialId: $id}) { deployment { id } } }`, { id: credential.id });
    expect(textWithBucket.errors?.[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  it('managed b64_json stores nothing; managed url links expire in about an hour and are retained ~1 h; async outputs 10 days', async () => {
    const before = await fetch(`${test.url}/healthz`);
    expect(before.status).toBe(200);
    const inline = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'nothing kept', size: '512x512', response_format: 'b64_json' });
    expect(inline.status).toBe(200);
    const [inlineRecord] = (await client.get('/requests?limit=1')).body.data;
    expect(inlineRecord).toMatchObject({ output_object_key: null, output_bucket: null, storage_provider: null });
    expect(await test.server.controlPlane.managedStore.head(`${workspace.workspaceId}/${inlineRecord.id}/0.png`)).toBeNull();

    const linked = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'linked', size: '512x512' });
    const expires = Number(new URL(linked.body.data[0].url).searchParams.get('expires'));
    expect(expires - Date.now() / 1000).toBeGreaterThan(3_500);
    const [linkedRecord] = (await client.get('/requests?limit=1')).body.data;
    const syncRow = (await test.server.controlPlane.requestRecords.find(linkedRecord.id))!;
    expect(syncRow.outputsExpireAt!.getTime() - syncRow.completedAt!.getTime()).toBeLessThan(2 * 3_600_000);

    const submitted = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'kept ten days', size: '512x512' });
    await client.waitForRecord(submitted.body.id);
    const asyncRow = (await test.server.controlPlane.requestRecords.find(submitted.body.id))!;
    const days = (asyncRow.outputsExpireAt!.getTime() - asyncRow.completedAt!.getTime()) / 86_400_000;
    expect(days).toBeCloseTo(10, 1);
  });

  it('the retention loop deletes managed outputs whose time is up; links to them stop working', async () => {
    const submitted = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'short-lived', size: '512x512' });
    const record = await client.waitForRecord(submitted.body.id);
    const key = record.output_object_key as string;
    expect(await test.server.controlPlane.managedStore.head(key)).not.toBeNull();
    await test.server.controlPlane.requestRecords.repository.update({ id: submitted.body.id }, { outputsExpireAt: new Date(Date.now() - 1_000) });
    expect(await test.server.controlPlane.retention.runOnce()).toBeGreaterThanOrEqual(1);
    expect(await test.server.controlPlane.managedStore.head(key)).toBeNull();
    expect((await fetch(record.output_urls[0])).status).toBe(404);
    const after = (await client.get(`/requests/${submitted.body.id}`)).body;
    expect(after).toMatchObject({ status: 'succeeded', output_urls: null });
  });

  it('tampered or expired links are refused with 403', async () => {
    const linked = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'signed', size: '512x512' });
    const url = new URL(linked.body.data[0].url);
    const tampered = new URL(url);
    tampered.searchParams.set('signature', `${url.searchParams.get('signature')!.slice(0, -1)}${url.searchParams.get('signature')!.endsWith('0') ? '1' : '0'}`);
    expect((await fetch(tampered)).status).toBe(403);
    const expired = new URL(url);
    expired.searchParams.set('expires', String(Math.floor(Date.now() / 1000) - 10));
    expect((await fetch(expired)).status).toBe(403);
    const otherKey = new URL(url.toString().replace('/0.png', '/1.png'));
    expect((await fetch(otherKey)).status).toBe(403);
    expect((await fetch(url)).status).toBe(200);
  });

  it('a bucket that refuses the upload gives 502 storage_upload_failed (sync) and a failed record (async)', async () => {
    const doomed = await startS3rver([CUSTOMER_BUCKET]);
    const created = await graphql(`mutation($input: CreateStorageCredentialInput!) { createStorageCredential(input: $input) { id } }`, {
      input: { name: 'doomed', endpoint: doomed.endpoint, region: 'us-east-1', bucket: CUSTOMER_BUCKET, accessKeyId: S3RVER_ACCESS_KEY_ID, secretAccessKey: S3RVER_SECRET_ACCESS_KEY },
    });
    const id = created.data.createStorageCredential.id;
    expect((await graphql('mutation($id: Int!) { verifyStorageCredential(id: $id) { status } }', { id })).data.verifyStorageCredential.status).toBe('verified');
    await doomed.stop();
    const sync = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'nowhere to go', size: '512x512', storage_credential_id: id });
    expect(sync.status).toBe(502);
    expect(sync.body.error.code).toBe('storage_upload_failed');
    const submitted = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'nowhere to go', size: '512x512', storage_credential_id: id });
    const record = await client.waitForRecord(submitted.body.id);
    expect(record).toMatchObject({ status: 'failed', error_code: 'storage_upload_failed', output_object_key: null });
  });

  it('with STORAGE_PROVIDER=s3 the managed store is an S3 bucket: agents upload to presigned S3 URLs', async () => {
    const { test: s3Managed, workspace: owner, deployment: managedDeployment } = await startWithDeployment({
      controlPlane: {
        storage: {
          storageProvider: 's3', outputBucket: MANAGED_BUCKET, s3Endpoint: s3.endpoint, s3Region: 'us-east-1',
          s3AccessKeyId: S3RVER_ACCESS_KEY_ID, s3SecretAccessKey: S3RVER_SECRET_ACCESS_KEY, s3ForcePathStyle: true, s3KeyPrefix: 'managed/',
        },
      },
      deployment: { modelId: IMAGE_MODEL },
    });
    try {
      const managedClient = new MediaClient(managedDeployment.baseUrl, owner.apiKey);
      const result = await managedClient.post('/images/generations', { model: IMAGE_MODEL, prompt: 'in the platform bucket', size: '512x512' });
      expect(result.status).toBe(200);
      const link = new URL(result.body.data[0].url);
      expect(link.origin).toBe(s3.endpoint);
      expect(link.searchParams.get('X-Amz-Expires')).toBe('3600');
      expect((await fetch(link)).status).toBe(200);
      const [record] = (await managedClient.get('/requests?limit=1')).body.data;
      expect(record).toMatchObject({ storage_provider: 's3', output_bucket: MANAGED_BUCKET });
      expect(await keysIn(MANAGED_BUCKET)).toContain(`managed/${owner.workspaceId}/${record.id}/0.png`);
    } finally {
      await s3Managed.stop();
    }
  });
});
