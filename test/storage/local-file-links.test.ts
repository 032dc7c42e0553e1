import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { LocalObjectStore } from '../../control-plane/storage/local-object-store';
import { startFileLinkServer, type FileLinkServer } from './file-link-server';

interface ErrorBody { error: { message: string; type: string; param: string | null; code: string } }

const MAX_UPLOAD_BYTES = 4096;

/** Local object store and its signed links, served by the real route behind the real error middleware. */
describe('local object store and file links', () => {
  let rootDir: string;
  let server: FileLinkServer;
  let store: LocalObjectStore;
  let nowMs: number;

  beforeAll(async () => {
    rootDir = fs.mkdtempSync(path.join(os.tmpdir(), 'inference-objects-'));
    nowMs = Date.now();
    let baseUrl = '';
    store = new LocalObjectStore({
      rootDir, bucket: 'outputs', publicUrl: () => baseUrl, signingKey: randomBytes(32), now: () => nowMs,
    });
    server = await startFileLinkServer({ store, maxUploadBytes: MAX_UPLOAD_BYTES });
    baseUrl = `${server.url}/`;
  });

  afterAll(async () => {
    await server?.stop();
    fs.rmSync(rootDir, { recursive: true, force: true });
  });

  const errorOf = async (response: Awaited<ReturnType<typeof request>>) => (await response.body.json()) as ErrorBody;
  const expectForbidden = async (response: Awaited<ReturnType<typeof request>>, message: string) => {
    expect(response.statusCode).toBe(403);
    const body = await errorOf(response);
    expect(body.error).toEqual({ message: expect.stringContaining(message), type: 'permission_error', param: null, code: 'permission_denied' });
  };

  it('round-trips bytes and content type through a presigned PUT and a presigned GET', async () => {
    const bytes = randomBytes(1500);
    const upload = await store.presignPut('ws_1/req_1/0.png', 'image/png', 600);
    expect(upload.method).toBe('PUT');
    expect(upload.url).toMatch(new RegExp(`^${server.url}/files/outputs/ws_1/req_1/0\\.png\\?expires=\\d+&method=PUT&signature=[0-9a-f]{64}$`));
    const put = await request(upload.url, { method: 'PUT', headers: upload.headers, body: bytes });
    expect(put.statusCode).toBe(200);
    await put.body.dump();

    const get = await request(await store.presignGet('ws_1/req_1/0.png', 600));
    expect(get.statusCode).toBe(200);
    expect(get.headers['content-type']).toBe('image/png');
    expect(get.headers['content-length']).toBe('1500');
    expect(get.headers['x-content-type-options']).toBe('nosniff');
    expect(Buffer.from(await get.body.arrayBuffer()).equals(bytes)).toBe(true);

    const head = await request(await store.presignGet('ws_1/req_1/0.png', 600), { method: 'HEAD' });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-length']).toBe('1500');
    await head.body.dump();
    expect(await store.head('ws_1/req_1/0.png')).toEqual({ size: 1500, contentType: 'image/png' });
    expect(fs.readdirSync(path.join(rootDir, '_tmp'))).toEqual([]);
  });

  it('reads byte ranges of an object: fewer bytes at its end, none past it, null when it is missing', async () => {
    const bytes = randomBytes(10_000);
    await store.put('ws_1/files/f.jsonl', bytes, 'application/jsonl');
    expect((await store.getRange('ws_1/files/f.jsonl', 100, 900))?.equals(bytes.subarray(100, 1_000))).toBe(true);
    expect((await store.getRange('ws_1/files/f.jsonl', 9_990, 100))?.equals(bytes.subarray(9_990))).toBe(true);
    expect(await store.getRange('ws_1/files/f.jsonl', 20_000, 10)).toEqual(Buffer.alloc(0));
    expect(await store.getRange('ws_1/files/none.jsonl', 0, 10)).toBeNull();
  });

  it('keeps keys with unusual characters intact through the URL', async () => {
    const key = 'ws 1/req#2/ü?x=1&y.webp';
    await store.put(key, Buffer.from('odd'), 'image/webp');
    const get = await request(await store.presignGet(key, 60));
    expect(get.statusCode).toBe(200);
    expect(await get.body.text()).toBe('odd');
  });

  it('refuses a tampered signature, a tampered key and a link for another method with 403', async () => {
    await store.put('ws_1/req_2/0.png', Buffer.from('first'), 'image/png');
    await store.put('ws_1/req_2/1.png', Buffer.from('second'), 'image/png');
    const link = await store.presignGet('ws_1/req_2/0.png', 600);

    const lastHex = link.at(-1) === '0' ? '1' : '0';
    await expectForbidden(await request(link.slice(0, -1) + lastHex), 'signature does not match');
    await expectForbidden(await request(link.replace('/0.png', '/1.png')), 'signature does not match');
    await expectForbidden(await request(link.replace(/expires=(\d+)/, (_, value) => `expires=${Number(value) + 3600}`)), 'signature does not match');
    await expectForbidden(await request(link.replace('/files/outputs/', '/files/other-bucket/')), 'not served here');

    await expectForbidden(await request(link, { method: 'PUT', body: 'overwrite' }), 'this link is for GET, not PUT');
    await expectForbidden(await request(link.replace('method=GET', 'method=PUT'), { method: 'PUT', body: 'overwrite' }), 'signature does not match');
    const upload = await store.presignPut('ws_1/req_2/0.png', 'image/png', 600);
    await expectForbidden(await request(upload.url), 'this link is for PUT, not GET');
    expect((await store.get('ws_1/req_2/0.png'))?.data.toString()).toBe('first');
    await expectForbidden(await request(`${server.url}/files/outputs/ws_1/req_2/0.png`), 'this link is for no method');
  });

  it('refuses an expired link with 403 and accepts it until then', async () => {
    await store.put('ws_1/req_3/0.png', Buffer.from('soon gone'), 'image/png');
    const link = await store.presignGet('ws_1/req_3/0.png', 60);
    const issuedAt = nowMs;
    try {
      nowMs = issuedAt + 59_000;
      const stillValid = await request(link);
      expect(stillValid.statusCode).toBe(200);
      await stillValid.body.dump();
      nowMs = issuedAt + 61_000;
      await expectForbidden(await request(link), 'expired');
    } finally {
      nowMs = issuedAt;
    }
  });

  it('answers 404 in the OpenAI error shape for a validly signed link to a missing object', async () => {
    const response = await request(await store.presignGet('ws_1/req_4/never.png', 60));
    expect(response.statusCode).toBe(404);
    expect((await errorOf(response)).error).toMatchObject({ type: 'invalid_request_error', code: 'not_found' });
  });

  it('rejects path traversal and ambiguous keys in the store and on the route', async () => {
    for (const key of ['../escape.png', 'a/../../escape.png', '/etc/passwd', 'a\\b.png', 'a\u0000b.png', 'a\nb', 'a//b.png', 'a/./b.png', 'a/', '']) {
      await expect(store.put(key, Buffer.from('x'), 'image/png')).rejects.toMatchObject({ code: 'invalid_request', param: 'key' });
      await expect(store.presignGet(key, 60)).rejects.toMatchObject({ code: 'invalid_request' });
      await expect(store.presignPut(key, 'image/png', 60)).rejects.toMatchObject({ code: 'invalid_request' });
    }
    for (const rawPath of ['/files/outputs/%2e%2e/%2e%2e/escape.png', '/files/outputs/a/../../../escape.png', '/files/outputs/a%5Cb.png', '/files/outputs/a%00b.png', '/files/outputs/%E0%A4%A']) {
      const response = await server.raw('PUT', `${rawPath}?expires=9999999999&method=PUT&signature=${'0'.repeat(64)}`, Buffer.from('x'));
      expect(response.status).toBe(400);
      expect(JSON.parse(response.body).error.code).toBe('invalid_request');
    }
    expect(fs.existsSync(path.join(rootDir, 'escape.png'))).toBe(false);
    expect(fs.existsSync(path.join(path.dirname(rootDir), 'escape.png'))).toBe(false);
  });

  it('answers 413 above the upload limit, declared or streamed, and keeps the previous object', async () => {
    await store.put('ws_1/req_5/0.png', Buffer.from('previous'), 'image/png');
    const upload = await store.presignPut('ws_1/req_5/0.png', 'image/png', 600);

    const declared = await request(upload.url, { method: 'PUT', headers: upload.headers, body: randomBytes(MAX_UPLOAD_BYTES + 1) });
    expect(declared.statusCode).toBe(413);
    expect((await errorOf(declared)).error).toMatchObject({ type: 'invalid_request_error', code: 'body_too_large' });

    const chunks = Array.from({ length: 8 }, () => randomBytes(1024));
    const streamed = await request(upload.url, { method: 'PUT', headers: upload.headers, body: Readable.from(chunks) });
    expect(streamed.statusCode).toBe(413);
    expect((await errorOf(streamed)).error.message).toContain(`${MAX_UPLOAD_BYTES} bytes`);

    expect((await store.get('ws_1/req_5/0.png'))?.data.toString()).toBe('previous');
    expect(fs.readdirSync(path.join(rootDir, '_tmp'))).toEqual([]);
    const exact = await request(upload.url, { method: 'PUT', headers: upload.headers, body: Readable.from([randomBytes(MAX_UPLOAD_BYTES)]) });
    expect(exact.statusCode).toBe(200);
    await exact.body.dump();
    expect((await store.head('ws_1/req_5/0.png'))?.size).toBe(MAX_UPLOAD_BYTES);
  });

  it('stores content types beside, not among, objects: a key ending in .json is just another object', async () => {
    await store.put('ws_2/req/a', Buffer.from('A'), 'image/png');
    await store.put('ws_2/req/a.json', Buffer.from('{"b":1}'), 'application/json');
    expect(await store.get('ws_2/req/a')).toEqual({ data: Buffer.from('A'), contentType: 'image/png' });
    expect(await store.get('ws_2/req/a.json')).toEqual({ data: Buffer.from('{"b":1}'), contentType: 'application/json' });
    expect(fs.readFileSync(path.join(rootDir, 'outputs', 'ws_2/req/a'), 'utf8')).toBe('A');

    await store.delete('ws_2/req/a');
    await store.delete('ws_2/req/a');
    expect(await store.get('ws_2/req/a')).toBeNull();
    expect(await store.head('ws_2/req/a')).toBeNull();
    expect(await store.head('ws_2')).toBeNull();
    expect(await store.get('ws_2/req/a.json')).not.toBeNull();

    await store.put('ws_3/req/0.png', Buffer.from('file'), 'image/png');
    await expect(store.put('ws_3/req/0.png/nested.png', Buffer.from('x'), 'image/png')).rejects.toMatchObject({ code: 'invalid_request', param: 'key' });
    await expect(store.put('ws_3/req', Buffer.from('x'), 'image/png')).rejects.toMatchObject({ code: 'invalid_request', param: 'key' });
    expect((await store.get('ws_3/req/0.png'))?.data.toString()).toBe('file');
    expect(fs.existsSync(path.join(rootDir, '_meta', 'outputs', 'ws_3', 'req.json'))).toBe(false);
    expect(fs.readdirSync(path.join(rootDir, '_tmp'))).toEqual([]);
  });

  it('refuses to start with a bucket name S3 would refuse or a short signing key', () => {
    const options = { rootDir, bucket: 'outputs', publicUrl: () => '', signingKey: randomBytes(32) };
    expect(() => new LocalObjectStore({ ...options, bucket: '_meta' })).toThrow('bucket name "_meta"');
    expect(() => new LocalObjectStore({ ...options, signingKey: randomBytes(16) })).toThrow('at least 32 bytes');
  });
});
