import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { S3ObjectStore } from '../../control-plane/storage/s3-object-store';
import { S3RVER_ACCESS_KEY_ID, S3RVER_SECRET_ACCESS_KEY, startS3rver, type TestS3 } from './start-s3rver';

/** S3ObjectStore against a real S3-compatible server (s3rver) over real sockets. */
describe('S3 object store', () => {
  let s3: TestS3;
  let store: S3ObjectStore;

  const storeFor = (bucket: string, overrides: Partial<ConstructorParameters<typeof S3ObjectStore>[0]> = {}) => new S3ObjectStore({
    endpoint: s3.endpoint, region: 'us-east-1', bucket, forcePathStyle: true,
    accessKeyId: S3RVER_ACCESS_KEY_ID, secretAccessKey: S3RVER_SECRET_ACCESS_KEY, maxAttempts: 1, ...overrides,
  });

  beforeAll(async () => {
    s3 = await startS3rver(['platform-outputs']);
    store = storeFor('platform-outputs', { keyPrefix: 'managed/' });
  });

  afterAll(async () => {
    store?.close();
    await s3?.stop();
  });

  it('puts, reads, heads and deletes objects under the key prefix', async () => {
    const bytes = randomBytes(4096);
    await store.put('ws_1/req_1/0.png', bytes, 'image/png');
    const read = await store.get('ws_1/req_1/0.png');
    expect(read?.contentType).toBe('image/png');
    expect(read?.data.equals(bytes)).toBe(true);
    expect(await store.head('ws_1/req_1/0.png')).toEqual({ size: 4096, contentType: 'image/png' });

    const unprefixed = storeFor('platform-outputs');
    try {
      expect((await unprefixed.get('managed/ws_1/req_1/0.png'))?.data.equals(bytes)).toBe(true);
    } finally {
      unprefixed.close();
    }

    await store.delete('ws_1/req_1/0.png');
    await store.delete('ws_1/req_1/0.png');
    expect(await store.get('ws_1/req_1/0.png')).toBeNull();
    expect(await store.head('ws_1/req_1/0.png')).toBeNull();
  });

  it('putSized streams exactly the declared bytes; a longer or shorter source fails naming why (upload links)', async () => {
    const bytes = randomBytes(200_000);
    const parts = (buffer: Buffer) => Readable.from([buffer.subarray(0, 70_000), buffer.subarray(70_000)]);
    await store.putSized('ws_1/files/up.bin', parts(bytes), 'application/octet-stream', bytes.length);
    expect((await store.get('ws_1/files/up.bin'))?.data.equals(bytes)).toBe(true);

    await expect(store.putSized('ws_1/files/long.bin', parts(bytes), 'application/octet-stream', bytes.length - 1)).rejects.toMatchObject({ code: 'body_too_large' });
    await expect(store.putSized('ws_1/files/short.bin', parts(bytes), 'application/octet-stream', bytes.length + 1)).rejects.toMatchObject({ code: 'invalid_request', param: 'content-length' });
    // No object is asserted gone: s3rver, unlike S3, may keep what reached it of an aborted PUT
    // after our delete. No file row ever names it, and the upload claims' sweep removes it.
    await store.delete('ws_1/files/up.bin');
  });

  it('streams an object and reads byte ranges of it (batch files: downloads and lines read where they are)', async () => {
    const bytes = randomBytes(300_000);
    await store.put('ws_1/files/f.jsonl', bytes, 'application/jsonl');
    const opened = await store.open('ws_1/files/f.jsonl');
    expect(opened).toMatchObject({ size: 300_000, contentType: 'application/jsonl' });
    const chunks: Buffer[] = [];
    for await (const chunk of opened!.stream) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
    expect((await store.getRange('ws_1/files/f.jsonl', 1_000, 5_000))?.equals(bytes.subarray(1_000, 6_000))).toBe(true);
    expect((await store.getRange('ws_1/files/f.jsonl', 299_990, 100))?.equals(bytes.subarray(299_990))).toBe(true);
    expect(await store.getRange('ws_1/files/f.jsonl', 400_000, 10)).toEqual(Buffer.alloc(0));
    expect(await store.open('ws_1/files/missing.jsonl')).toBeNull();
    expect(await store.getRange('ws_1/files/missing.jsonl', 0, 10)).toBeNull();
    await store.delete('ws_1/files/f.jsonl');
    // Written in parts (a batch's output file, a page at a time): one object, the parts in order.
    const parts = [randomBytes(70_000), randomBytes(5), randomBytes(100_000)];
    await store.put('ws_1/files/parts.jsonl', parts, 'application/jsonl');
    expect((await store.get('ws_1/files/parts.jsonl'))?.data.equals(Buffer.concat(parts))).toBe(true);
    await store.delete('ws_1/files/parts.jsonl');
  });

  it('accepts a plain HTTP PUT to a presigned URL and serves the same bytes from a presigned GET', async () => {
    const bytes = randomBytes(70_000);
    const upload = await store.presignPut('ws_1/req_2/0.mp4', 'video/mp4', 900);
    expect(upload).toMatchObject({ method: 'PUT', headers: { 'content-type': 'video/mp4' } });
    const url = new URL(upload.url);
    expect(url.pathname).toBe('/platform-outputs/managed/ws_1/req_2/0.mp4');
    expect(url.searchParams.get('X-Amz-SignedHeaders')).toBe('content-type;host');
    expect(url.searchParams.get('X-Amz-Expires')).toBe('900');
    // With the SDK's default checksum mode the URL pins the CRC32 of an *empty* body: real S3
    // then rejects every upload (BadDigest) while s3rver, which ignores it, would not notice.
    expect([...url.searchParams.keys()].filter((name) => name.toLowerCase().includes('checksum'))).toEqual([]);

    const put = await request(upload.url, { method: upload.method, headers: upload.headers, body: bytes });
    expect(put.statusCode).toBe(200);
    await put.body.dump();

    const get = await request(await store.presignGet('ws_1/req_2/0.mp4', 3600));
    expect(get.statusCode).toBe(200);
    expect(get.headers['content-type']).toBe('video/mp4');
    expect(Buffer.from(await get.body.arrayBuffer()).equals(bytes)).toBe(true);
    // Chunk framing (aws-chunked) would show up as a different stored size.
    expect((await store.head('ws_1/req_2/0.mp4'))?.size).toBe(bytes.length);
  });

  it('refuses unsafe keys and out-of-range link lifetimes before any request', async () => {
    for (const key of ['../x.png', '/x.png', 'a\\b.png', 'a\u0001b.png']) {
      await expect(store.put(key, Buffer.from('x'), 'image/png')).rejects.toMatchObject({ code: 'invalid_request', param: 'key' });
      await expect(store.presignGet(key, 60)).rejects.toMatchObject({ code: 'invalid_request' });
    }
    await expect(store.presignGet('ok.png', 0)).rejects.toMatchObject({ code: 'invalid_request', param: 'expiresInSeconds' });
    await expect(store.presignGet('ok.png', 8 * 24 * 3600)).rejects.toMatchObject({ code: 'invalid_request', param: 'expiresInSeconds' });
  });

  it('reports failures naming the operation, the object and the S3 error: writes as storage_upload_failed', async () => {
    const missingBucket = storeFor('no-such-bucket');
    try {
      const error = await missingBucket.put('a.png', Buffer.from('x'), 'image/png').catch((caught) => caught);
      expect(error).toMatchObject({ code: 'storage_upload_failed' });
      expect(error.message).toContain('write of s3://no-such-bucket/a.png failed: NoSuchBucket');
      expect(error.cause).toBeDefined();
      const readError = await missingBucket.get('a.png').catch((caught) => caught);
      expect(readError).toMatchObject({ code: 'upstream_error' });
      expect(readError.message).toContain('read of s3://no-such-bucket/a.png failed: NoSuchBucket');
    } finally {
      missingBucket.close();
    }
  });
});
