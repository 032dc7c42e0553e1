import net from 'node:net';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';

/**
 * Multipart bodies held in memory are bounded per workspace and per server (UPLOAD_MEMORY_*):
 * a real server, a slow upload holding its declared length, and probes that declare no bytes
 * (refused at once while the memory is held, a 400 for their empty form once it is given back).
 */
describe('upload memory on a real server', () => {
  let test: TestServer;
  let owner: TestWorkspace;
  let other: TestWorkspace;
  let slug: string;
  let otherSlug: string;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { requests: { uploadMemoryBytes: 150_000, uploadMemoryPerWorkspaceBytes: 100_000 } } as never });
    owner = await test.createWorkspace();
    other = await test.createWorkspace();
    slug = (await test.createDeployment(owner)).slug;
    otherSlug = (await test.createDeployment(other, { provider: 'external' })).slug;
  });

  afterAll(async () => {
    await test?.stop();
  });

  const port = () => Number(new URL(test.url).port);
  const head = (path: string, key: string, length: number) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${length}\r\n\r\n`;

  /** Status of an upload that declares no bytes (answered without reading anything). */
  const probe = async (path: string, key: string): Promise<number> => {
    const response = await fetch(`${test.url}${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=b', 'content-length': '0' },
    });
    await response.arrayBuffer();
    return response.status;
  };

  it('a slow 120 kB file upload holds its memory: the same workspace gets 429, others 503 past the total, for files and image edits, until it ends', async () => {
    const files = `/d/${slug}/v1/files`;
    const otherFiles = `/d/${otherSlug}/v1/files`;
    const edits = `/d/${otherSlug}/v1/images/edits`;
    // Nothing held: an empty form is the form's own 400.
    expect(await probe(files, owner.apiKey)).toBe(400);

    const slow = net.connect(port(), '127.0.0.1');
    await new Promise((resolve) => slow.once('connect', resolve));
    slow.write(head(files, owner.apiKey, 120_000) + '--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n');
    await waitFor(async () => await probe(files, owner.apiKey) === 429, 10_000, 'the slow upload held');

    const refused = await fetch(`${test.url}${files}`, {
      method: 'POST', headers: { authorization: `Bearer ${owner.apiKey}`, 'content-type': 'multipart/form-data; boundary=b', 'content-length': '0' },
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect((await refused.json()).error).toMatchObject({ type: 'rate_limit_error', message: 'this workspace already has 117.2 KiB of uploads being received by this server (at most 97.7 KiB at once); retry when one ends' });
    // Another workspace fits beside it while the total holds: 120 kB + 0.
    expect(await probe(otherFiles, other.apiKey)).toBe(400);
    // A declared 40 kB from another workspace does not (120 + 40 > 150 kB): 503 before any byte
    // of it is read (the headers alone are sent), on image edits too.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port(), '127.0.0.1', () => socket.write(head(edits, other.apiKey, 40_000)));
      let text = '';
      socket.on('data', (part) => (text += part.toString()));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(answer).toContain('"type":"service_unavailable_error"');
    expect(answer).toContain('of other uploads');

    // The client goes away mid-body: its memory is given back.
    slow.destroy();
    await waitFor(async () => await probe(files, owner.apiKey) === 400, 10_000, 'the memory given back');
  });
});
