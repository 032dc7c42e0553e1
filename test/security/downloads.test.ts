import http from 'node:http';
import OpenAI from 'openai';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { chatLine, jsonl, upload } from '../batches/support/batch-helpers';

const STALL_TIMEOUT_MS = 2_000;
const PARALLEL = 10;

/**
 * Issue 33: `GET /files/{id}/content` read the whole file into memory, outside any bound; 25
 * unread downloads of a 100 MB file took the server to 2.6 GB. A download now streams from the
 * object store as the client reads it, holds a bounded buffer, and a client that stops reading
 * is cut after STREAM_STALL_TIMEOUT_MS.
 */
describe('security: file downloads', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let client: OpenAI;
  let baseUrl: string;
  let fileId: string;
  let data: Buffer;

  beforeAll(async () => {
    test = await startTestServer({ gateway: { streamStallTimeoutMs: STALL_TIMEOUT_MS } });
    workspace = await test.createWorkspace();
    const chat = await test.createDeployment(workspace);
    baseUrl = chat.baseUrl;
    client = new OpenAI({ baseURL: baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    // ~50 MB: 12,500 lines of ~4 KB.
    const content = 'x'.repeat(4_000);
    data = jsonl(Array.from({ length: 12_500 }, (_, index) => chatLine(`line-${index}`, content)));
    fileId = await upload(client, data);
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('sends the file whole to a client that reads it', async () => {
    const content = Buffer.from(await (await client.files.content(fileId)).arrayBuffer());
    expect(content.length).toBe(data.length);
    expect(content.equals(data)).toBe(true);
  });

  it('holds a bounded buffer per unread download, not the file, and cuts the clients that stopped reading', async () => {
    const tally = test.server.gateway.downloads;
    const rssBefore = process.memoryUsage().rss;
    const url = new URL(`${baseUrl}/files/${fileId}/content`);
    const responses: http.IncomingMessage[] = [];
    const received: Array<Promise<number>> = [];
    for (let index = 0; index < PARALLEL; index++) {
      received.push(new Promise<number>((resolve, reject) => {
        http.get(url, { headers: { authorization: `Bearer ${workspace.apiKey}` } }, (response) => {
          expect(response.statusCode).toBe(200);
          // Not read: the socket's buffers fill, then the server's response does.
          response.pause();
          responses.push(response);
          let bytes = 0;
          response.on('data', (chunk: Buffer) => (bytes += chunk.length));
          response.once('error', () => undefined);
          response.once('close', () => resolve(bytes));
        }).once('error', reject);
      }));
    }
    await waitFor(() => tally.active === PARALLEL, 10_000, 'every download to start');
    // Until they are cut, nothing more leaves for these clients: what the server holds for them is what it will hold.
    let heldAtMost = 0;
    let rssAtMost = 0;
    await waitFor(() => {
      heldAtMost = Math.max(heldAtMost, tally.heldBytes());
      rssAtMost = Math.max(rssAtMost, process.memoryUsage().rss);
      return tally.active === 0;
    }, STALL_TIMEOUT_MS * 5 + 10_000, 'the stalled downloads to be cut');
    // Reading again, each client gets what the kernel's buffers held, then the end of a cut connection.
    for (const response of responses) response.resume();
    for (const bytes of await Promise.all(received)) expect(bytes).toBeLessThan(data.length);
    // Per download: the store's stream buffer and the response's, about 100 KB, against 50 MB each before.
    expect(tally.maxHeldBytes).toBeLessThan(1024 * 1024);
    expect(heldAtMost).toBeLessThan(PARALLEL * 1024 * 1024);
    // The whole process (server and these clients) grew by far less than the 500 MB ten buffered files would take.
    expect(rssAtMost - rssBefore).toBeLessThan(200 * 1024 * 1024);
  });
});
