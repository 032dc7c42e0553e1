import { randomBytes } from 'node:crypto';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { SecretBox } from '../../control-plane/secret-box';
import { StorageCredentialService } from '../../control-plane/storage/storage-credential.service';
import type { StorageCredentialInput } from '../../control-plane/storage/storage-credential-input';
import { CUSTOMER_BUCKET as BUCKET, startCredentialFixture, type CredentialFixture } from './credential-fixture';
import { S3RVER_ACCESS_KEY_ID, S3RVER_SECRET_ACCESS_KEY } from './start-s3rver';

/** Customer bucket credentials on a fresh PostgreSQL database, verified against a real s3rver. */
describe('storage credentials', () => {
  let fixture: CredentialFixture;
  let secret: string;

  beforeAll(async () => {
    fixture = await startCredentialFixture();
    secret = fixture.secret;
  });

  afterAll(async () => {
    await fixture?.stop();
  });

  const input = (overrides: Partial<Record<keyof StorageCredentialInput, unknown>> = {}) => fixture.input(overrides);
  const newWorkspace = () => fixture.newWorkspace();

  it('rejects each invalid field with invalid_request naming it', async () => {
    const workspaceId = await newWorkspace();
    const cases: Array<[Partial<Record<keyof StorageCredentialInput, unknown>>, string, string]> = [
      [{ name: '   ' }, 'name', 'name'],
      [{ name: undefined }, 'name', 'name is required'],
      [{ provider: 'gcs' }, 'provider', "provider must be 's3'"],
      [{ endpoint: 'not a url' }, 'endpoint', 'endpoint must be an http(s) URL'],
      [{ endpoint: 'ftp://files.example.com' }, 'endpoint', 'endpoint must use http or https'],
      [{ endpoint: 'https://user:pass@s3.example.com' }, 'endpoint', 'endpoint must not contain credentials'],
      [{ region: 'US East' }, 'region', 'region must be like'],
      [{ region: undefined }, 'region', 'region is required'],
      [{ bucket: 'Bad_Bucket' }, 'bucket', 'bucket "Bad_Bucket" must be 3-63 characters'],
      [{ bucket: 'ab' }, 'bucket', 'bucket "ab"'],
      [{ bucket: '192.168.0.1' }, 'bucket', 'IP address'],
      [{ bucket: 'my..bucket' }, 'bucket', '".."'],
      [{ bucket: 'xn--bucket' }, 'bucket', 'reserved prefix'],
      [{ keyPrefix: '../escape' }, 'keyPrefix', 'keyPrefix'],
      [{ keyPrefix: '/absolute' }, 'keyPrefix', 'must not start with "/"'],
      [{ accessKeyId: '' }, 'accessKeyId', 'accessKeyId must be'],
      [{ secretAccessKey: 'has space' }, 'secretAccessKey', 'secretAccessKey must be'],
      [{ secretAccessKey: 42 }, 'secretAccessKey', 'secretAccessKey is required and must be a string'],
    ];
    for (const [overrides, param, message] of cases) {
      const error = await fixture.service.create(workspaceId, input(overrides)).catch((caught) => caught);
      expect({ overrides, code: error.code, param: error.param }).toEqual({ overrides, code: 'invalid_request', param });
      expect(error.message).toContain(message);
    }
    expect(await fixture.service.list(workspaceId)).toEqual([]);
  });

  it('refuses endpoints on private, loopback or link-local addresses unless the operator allows them, and never contacts them', async () => {
    const contacted: string[] = [];
    const names: Record<string, string[]> = { 's3.example.com': ['52.216.8.10'], 'rebound.example.com': ['10.0.0.5'] };
    const strict = new StorageCredentialService(fixture.dataSource, {
      encryptionKey: fixture.encryptionKey, resolve: async (hostname) => names[hostname] ?? [],
    }, (options) => {
      contacted.push(String(options.endpoint));
      throw new Error('must not be contacted');
    });
    const workspaceId = await newWorkspace();
    const cases: Array<[string, string]> = [
      ['http://169.254.169.254', '169.254.169.254 is a private, loopback, link-local or reserved address'],
      [fixture.s3.endpoint, 'is a private, loopback, link-local or reserved address'],
      ['https://[::1]:9000', '::1 is a private'],
      ['https://minio.internal', "'minio.internal' is not a public host name"],
      ['https://rebound.example.com', "'rebound.example.com' resolves to 10.0.0.5"],
      ['https://nowhere.example.com', "'nowhere.example.com' does not resolve"],
    ];
    for (const [endpoint, why] of cases) {
      const error = await strict.create(workspaceId, input({ endpoint })).catch((caught) => caught);
      expect({ endpoint, code: error.code, param: error.param }).toEqual({ endpoint, code: 'invalid_request', param: 'endpoint' });
      expect(error.message).toContain(why);
    }
    expect(await strict.list(workspaceId)).toEqual([]);

    // A public name at creation that points inside the network by verification time: not contacted.
    const created = await strict.create(workspaceId, input({ endpoint: 'https://s3.example.com' }));
    names['s3.example.com'] = ['192.168.1.20'];
    const verified = await strict.verify(workspaceId, created.id);
    expect(verified).toMatchObject({ status: 'failed', verifiedAt: null });
    expect(verified.statusMessage).toContain("not contacted: the endpoint must be reachable on a public address: 's3.example.com' resolves to 192.168.1.20");
    expect(contacted).toEqual([]);
  });

  it('stores the secret sealed and never shows it, nor the full key id, in the public view', async () => {
    const workspaceId = await newWorkspace();
    const credential = await fixture.service.create(workspaceId, input({ accessKeyId: 'AKIAEXAMPLE1234WXYZ', endpoint: `${fixture.s3.endpoint}/` }));
    expect(credential.toPublic()).toEqual({
      id: credential.id, name: 'my bucket', provider: 's3', endpoint: fixture.s3.endpoint, region: 'us-east-1', bucket: BUCKET,
      keyPrefix: 'renders/', accessKeyId: '****WXYZ', status: 'unverified', statusMessage: null, verifiedAt: null,
      createdAt: expect.any(Date),
    });
    expect(Number.isInteger(credential.id)).toBe(true);
    const serialized = JSON.stringify([credential, await fixture.service.list(workspaceId), await fixture.service.get(workspaceId, credential.id)]);
    expect(serialized).not.toContain(secret);
    expect(serialized).not.toContain('AKIAEXAMPLE1234WXYZ');
    expect(serialized).not.toContain('ecret');

    const [row] = await fixture.dataSource.query('SELECT secret_ciphertext FROM storage_credentials WHERE id = $1', [credential.id]);
    const sealed: Buffer = row.secret_ciphertext;
    expect(sealed.length).toBe(12 + 16 + Buffer.byteLength(secret));
    expect(sealed.includes(Buffer.from(secret))).toBe(false);
    expect(sealed.toString('latin1')).not.toContain(secret);
    const box = new SecretBox(fixture.encryptionKey);
    expect(box.open(sealed, `storage_credentials.secret:${workspaceId}`)).toBe(secret);
    expect(() => box.open(sealed, 'storage_credentials.secret:ws_other')).toThrow();
    expect(() => new SecretBox(randomBytes(32)).open(sealed, `storage_credentials.secret:${workspaceId}`)).toThrow();
  });

  it('verifies a working bucket with a real write, read and delete, then hands out its store', async () => {
    const workspaceId = await newWorkspace();
    const created = await fixture.service.create(workspaceId, input());
    const verified = await fixture.service.verify(workspaceId, created.id);
    expect(verified).toMatchObject({ status: 'verified', statusMessage: null, verifiedAt: expect.any(Date) });
    expect((await fixture.service.get(workspaceId, created.id)).status).toBe('verified');

    const client = new S3Client({
      endpoint: fixture.s3.endpoint, region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: S3RVER_ACCESS_KEY_ID, secretAccessKey: S3RVER_SECRET_ACCESS_KEY },
    });
    try {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'renders/' }));
      expect(listed.Contents ?? []).toEqual([]);

      const store = await fixture.service.storeFor(workspaceId, created.id);
      await store.put('ws/req/0.png', Buffer.from('png bytes'), 'image/png');
      expect((await store.get('ws/req/0.png'))?.data.toString()).toBe('png bytes');
      const keys = (await client.send(new ListObjectsV2Command({ Bucket: BUCKET }))).Contents?.map((object) => object.Key);
      expect(keys).toEqual(['renders/ws/req/0.png']);
      store.close?.();
    } finally {
      client.destroy();
    }
  });

  it('records a readable failure for an unknown bucket, bad credentials or an unreachable endpoint', async () => {
    const workspaceId = await newWorkspace();
    const outcomes = [];
    for (const overrides of [{ bucket: 'no-such-bucket' }, { accessKeyId: 'WRONGKEYID' }, { endpoint: 'http://127.0.0.1:9' }]) {
      const created = await fixture.service.create(workspaceId, input(overrides));
      const result = await fixture.service.verify(workspaceId, created.id);
      expect(result).toMatchObject({ status: 'failed', verifiedAt: null });
      outcomes.push(result.statusMessage);
      const error = await fixture.service.storeFor(workspaceId, created.id).catch((caught) => caught);
      expect(error).toMatchObject({ code: 'storage_credential_not_verified', param: 'storage_credential_id' });
      expect(error.message).toContain('its last verification failed');
    }
    expect(outcomes[0]).toContain('NoSuchBucket: The specified bucket does not exist');
    expect(outcomes[0]).toContain('s3://no-such-bucket/renders/.platform-verify/');
    expect(outcomes[1]).toContain('InvalidAccessKeyId');
    expect(outcomes[2]).toContain('ECONNREFUSED');
    for (const message of outcomes) expect(message).not.toContain(secret);
  });

  it('refuses unverified and unknown credentials in storeFor with distinct errors', async () => {
    const workspaceId = await newWorkspace();
    const created = await fixture.service.create(workspaceId, input());
    const unverified = await fixture.service.storeFor(workspaceId, created.id).catch((caught) => caught);
    expect(unverified).toMatchObject({ code: 'storage_credential_not_verified', param: 'storage_credential_id' });
    expect(unverified.message).toContain('has not been verified yet');
    for (const id of [created.id + 10_000, 0, -1, 1.5, 2 ** 40]) {
      const unknown = await fixture.service.storeFor(workspaceId, id).catch((caught) => caught);
      expect(unknown).toMatchObject({ code: 'storage_credential_not_found', param: 'storage_credential_id' });
      expect(unknown.message).toContain('is not a storage credential of this workspace');
    }
  });

  it('builds stores through the injected factory: decrypted secret, path-style only for custom endpoints', async () => {
    const workspaceId = await newWorkspace();
    const seen: unknown[] = [];
    const recording = new StorageCredentialService(fixture.dataSource, { encryptionKey: fixture.encryptionKey, allowPrivateEndpoints: true }, (options) => {
      seen.push(options);
      return { provider: 's3', bucket: options.bucket, put: async () => {}, get: async () => ({ data: Buffer.from('no'), contentType: 'text/plain' }),
        head: async () => null, delete: async () => {}, presignPut: async () => ({ url: '', method: 'PUT', headers: {} }), presignGet: async () => '' };
    });
    const onAws = await recording.create(workspaceId, input({ endpoint: null }));
    const onMinio = await recording.create(workspaceId, input({ endpoint: 'https://minio.example.com:9000/' }));
    const result = await recording.verify(workspaceId, onAws.id);
    expect(result.status).toBe('failed');
    expect(result.statusMessage).toContain('read back differs');
    await recording.verify(workspaceId, onMinio.id);
    const expected = { region: 'us-east-1', bucket: BUCKET, accessKeyId: S3RVER_ACCESS_KEY_ID, secretAccessKey: secret, keyPrefix: 'renders/' };
    expect(seen).toEqual([
      { ...expected, endpoint: undefined, forcePathStyle: false },
      { ...expected, endpoint: 'https://minio.example.com:9000', forcePathStyle: true },
    ]);
  });
});
