import net from 'node:net';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlAs, OPERATOR_TOKEN } from './support/security-client';

/**
 * What a request holds of the server before it is served (issue 33): memory by the bytes it
 * really sent, never by what it declares (uploads that sent nothing held the whole upload memory
 * for 300 s); nothing at all of a body the key and deployment already refuse (a zero-credit key
 * held 4 MiB per slow body: 500 of them took the server to 2.1 GB); and a key's requests in
 * flight are bounded. Real server, raw sockets for the slow clients.
 */
describe('held memory and requests in flight on a real server', () => {
  let test: TestServer;
  let owner: TestWorkspace;
  let other: TestWorkspace;
  let slug: string;
  let otherSlug: string;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    test = await startTestServer({
      controlPlane: { operatorToken: OPERATOR_TOKEN, budgets: { memory: { key: 100_000, workspace: 100_000, server: 150_000 }, requests: { key: 4 } } },
      gateway: { bodyMemoryThresholdBytes: 1_000 },
    });
    owner = await test.createWorkspace();
    other = await test.createWorkspace();
    slug = (await test.createDeployment(owner)).slug;
    otherSlug = (await test.createDeployment(other, { provider: 'external' })).slug;
  });

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await waitFor(() => test.server.controlPlane.budget.used('requests', 'server') === 0, 10_000, 'every request given back');
  });

  afterAll(async () => {
    await test?.stop();
  });

  const port = () => Number(new URL(test.url).port);
  const held = () => test.server.controlPlane.budget.used('memory', 'server');
  const multipartHead = (path: string, key: string, length: number) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${length}\r\n\r\n`;
  const jsonHead = (path: string, key: string, length: number) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

  /** A raw connection that sent `data`; its answer (all it received until it closed or `waitMs` passed). */
  async function open(data: string): Promise<{ socket: net.Socket; answer: (waitMs?: number) => Promise<string> }> {
    const socket = net.connect(port(), '127.0.0.1');
    sockets.push(socket);
    await new Promise((resolve) => socket.once('connect', resolve));
    let text = '';
    let closed = false;
    socket.on('data', (part) => (text += part.toString()));
    socket.on('close', () => (closed = true));
    socket.on('error', () => {});
    socket.write(data);
    return {
      socket,
      answer: async (waitMs = 10_000) => {
        const deadline = Date.now() + waitMs;
        while (!closed && !/\r\n\r\n[\s\S]*\}/.test(text) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        return text;
      },
    };
  }

  /** Status of an upload that declares no bytes (answered without reading anything). */
  const probe = async (path: string, key: string): Promise<number> => {
    const response = await fetch(`${test.url}${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=b', 'content-length': '0' },
    });
    await response.arrayBuffer();
    return response.status;
  };

  it('uploads that declare 120 kB and send nothing hold nothing: other uploads are read as before', async () => {
    for (let index = 0; index < 3; index++) await open(multipartHead(`/d/${slug}/v1/files`, owner.apiKey, 120_000));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(held()).toBe(0);
    // Nothing held: another workspace's (empty) upload is the form's own 400, not a 503.
    expect(await probe(`/d/${otherSlug}/v1/files`, other.apiKey)).toBe(400);
    expect(await probe(`/d/${slug}/v1/files`, owner.apiKey)).toBe(400);
  });

  it('bytes really received are held: past the key\'s share another body of it is refused mid-body (429 naming the budget), and given back when the client leaves', async () => {
    const part = '--b\r\nContent-Disposition: form-data; name="file"; filename="f.jsonl"\r\n\r\n';
    const slow = await open(multipartHead(`/d/${slug}/v1/files`, owner.apiKey, 200_000) + part + 'x'.repeat(80_000));
    await waitFor(() => held() >= 80_000, 10_000, 'the bytes received held');
    const second = await open(jsonHead(`/d/${slug}/v1/chat/completions`, owner.apiKey, 40_000) + '{"messages":[{"role":"user","content":"' + 'y'.repeat(39_000));
    const answer = await second.answer();
    expect(answer).toMatch(/^HTTP\/1\.1 429 /);
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(answer).toContain("budget 'memory' is used up for this API key");
    slow.socket.destroy();
    await waitFor(() => held() === 0, 10_000, 'the memory given back');
  });

  it('a zero-credit key is answered 402 before its body is read: nothing held, no byte of the body needed', async () => {
    const operator = graphqlAs(test.url, OPERATOR_TOKEN);
    const created = await operator('mutation { createWorkspace(name: "broke", creditBalance: "0") { workspace { id } plaintext } }');
    const broke = created.body.data.createWorkspace;
    const brokeSlug = (await test.createDeployment({ workspaceId: broke.workspace.id, apiKey: broke.plaintext, apiKeyId: '' }, { provider: 'external' })).slug;
    // 4 MiB declared, not one byte of it sent.
    const answers = await Promise.all(Array.from({ length: 20 }, async () => (await open(jsonHead(`/d/${brokeSlug}/v1/chat/completions`, broke.plaintext, 4 * 1024 * 1024))).answer()));
    for (const answer of answers) {
      expect(answer).toMatch(/^HTTP\/1\.1 402 /);
      expect(answer).toContain('"code":"insufficient_quota"');
      expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    }
    expect(held()).toBe(0);
  });

  it('a key\'s requests in flight stop at its share (429 naming the budget) while another key is served', async () => {
    const slow = [];
    for (let index = 0; index < 4; index++) slow.push(await open(jsonHead(`/d/${slug}/v1/chat/completions`, owner.apiKey, 100) + '{"messages":'));
    await waitFor(() => test.server.controlPlane.budget.used('requests', 'key', { keyId: owner.apiKeyId }) === 4, 10_000, 'four requests in flight');
    const fifth = await fetch(`${test.url}/d/${slug}/v1/models`, { headers: { authorization: `Bearer ${owner.apiKey}` } });
    expect(fifth.status).toBe(429);
    expect((await fifth.json()).error.message).toContain("budget 'requests' is used up for this API key: 4 of at most 4");
    const another = await fetch(`${test.url}/d/${otherSlug}/v1/models`, { headers: { authorization: `Bearer ${other.apiKey}` } });
    expect(another.status).toBe(200);
    for (const connection of slow) connection.socket.destroy();
    await waitFor(() => test.server.controlPlane.budget.used('requests', 'key', { keyId: owner.apiKeyId }) === 0, 10_000, 'the requests given back');
    const after = await fetch(`${test.url}/d/${slug}/v1/models`, { headers: { authorization: `Bearer ${owner.apiKey}` } });
    expect(after.status).toBe(200);
  });
});
