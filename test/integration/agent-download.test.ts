/**
 * `/agent/{version}/worker-agent-linux-{arch}[.sha256]` on a real server, from a temporary
 * AGENT_BINARY_DIR holding small fake binaries (the real 116 MB one is checked once, at the end,
 * when it is built): the exact bytes and their SHA-256, a `.sha256` that `sha256sum -c` accepts,
 * 404s naming what is available, names outside the two patterns falling through, and an aborted
 * download closing its file.
 */
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { loadControlPlaneConfig } from '../../control-plane/config/control-plane-config';
import { routeLabel } from '../../gateway/route-label';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';

const ROOT = path.join(__dirname, '../..');
/** package.json's version, read here rather than through the code under test. */
const VERSION = String(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version);

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A request whose path is sent as written: fetch() would resolve `..` before sending it. */
function raw(url: string, requestPath: string, method = 'GET', headers: http.OutgoingHttpHeaders = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const request = http.request({ hostname, port, path: requestPath, method, headers, agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end();
  });
}

/** The SHA-256 of a response body, hashed as it arrives (never held whole). */
function sha256OfDownload(url: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; sha256: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false }, (response) => {
      const hash = crypto.createHash('sha256');
      let bytes = 0;
      response.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        bytes += chunk.length;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, sha256: hash.digest('hex'), bytes }));
      response.on('error', reject);
    }).on('error', reject);
  });
}

function sha256Of(file: string): string {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** This process's descriptors open on `file` (the server runs in-process); null where /proc is not. */
function openDescriptors(file: string): number | null {
  if (!fs.existsSync('/proc/self/fd')) return null;
  let count = 0;
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      if (fs.readlinkSync(path.join('/proc/self/fd', fd)) === file) count++;
    } catch {
      // Closed while listed.
    }
  }
  return count;
}

describe('GET|HEAD /agent/{version}/worker-agent-linux-{arch}[.sha256]', () => {
  // root/bin is the AGENT_BINARY_DIR; root/outside.txt is what traversal attempts would reach.
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-download-')));
  const dir = path.join(root, 'bin');
  const x64 = path.join(dir, 'worker-agent-linux-x64');
  const arm64 = path.join(dir, 'worker-agent-linux-arm64');
  const OUTSIDE_MARKER = `outside-${crypto.randomUUID()}`;
  let x64Sha256: string;
  let x64Size: number;
  let test: TestServer;

  beforeAll(async () => {
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(root, 'outside.txt'), OUTSIDE_MARKER);
    // Random head, sparse zero tail: 24 MiB, more than the socket buffers take, so a client that
    // stops reading leaves the server mid-file (the abort test), at no disk cost.
    fs.writeFileSync(x64, crypto.randomBytes(256 * 1024));
    fs.truncateSync(x64, 24 * 1024 * 1024);
    x64Sha256 = sha256Of(x64);
    x64Size = fs.statSync(x64).size;
    // The sidecar exactly as build-agent.ts writes it.
    fs.writeFileSync(`${x64}.sha256`, `${x64Sha256}  worker-agent-linux-x64\n`);
    test = await startTestServer({ controlPlane: { agentBinaryDir: dir, localAgents: false } });
  });

  afterAll(async () => {
    await test?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const binaryPath = (arch: string, version = VERSION) => `/agent/${version}/worker-agent-linux-${arch}`;

  it('AGENT_BINARY_DIR is the setting that names the folder', () => {
    expect(loadControlPlaneConfig({ AGENT_BINARY_DIR: dir }).agentBinaryDir).toBe(dir);
  });

  it('GET streams the exact bytes, with their SHA-256 and headers that let caches keep them for good', async () => {
    const response = await raw(test.url, binaryPath('x64'));
    expect(response.status).toBe(200);
    expect(response.body.length).toBe(x64Size);
    expect(crypto.createHash('sha256').update(response.body).digest('hex')).toBe(x64Sha256);
    expect(response.body.equals(fs.readFileSync(x64))).toBe(true);
    expect(response.headers).toMatchObject({
      'content-type': 'application/octet-stream',
      'content-length': String(x64Size),
      'x-checksum-sha256': x64Sha256,
      etag: `"${x64Sha256}"`,
      'cache-control': 'public, max-age=31536000, immutable',
    });
  });

  it('HEAD has the same headers and no body', async () => {
    const response = await raw(test.url, binaryPath('x64'), 'HEAD');
    expect(response.status).toBe(200);
    expect(response.body.length).toBe(0);
    expect(response.headers['content-length']).toBe(String(x64Size));
    expect(response.headers['x-checksum-sha256']).toBe(x64Sha256);
    const sidecar = await raw(test.url, `${binaryPath('x64')}.sha256`, 'HEAD');
    expect(sidecar.status).toBe(200);
    expect(sidecar.body.length).toBe(0);
  });

  it('a cache revalidating with the ETag gets 304', async () => {
    const response = await raw(test.url, binaryPath('x64'), 'GET', { 'if-none-match': `"${x64Sha256}"` });
    expect(response.status).toBe(304);
    expect(response.body.length).toBe(0);
    expect((await raw(test.url, binaryPath('x64'), 'HEAD', { 'if-none-match': '"something-else"' })).status).toBe(200);
  });

  it('the .sha256 is `<hex>  <name>`, and sha256sum -c accepts it next to the file (and refuses another file)', async () => {
    const response = await raw(test.url, `${binaryPath('x64')}.sha256`);
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/plain/);
    expect(response.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const text = response.body.toString('utf8');
    expect(text).toBe(`${x64Sha256}  worker-agent-linux-x64\n`);
    const check = spawnSync('sha256sum', ['-c', '-'], { cwd: dir, input: text });
    if (check.error) return; // no coreutils here: the exact format is asserted above
    expect(check.status).toBe(0);
    const other = fs.mkdtempSync(path.join(root, 'other-'));
    fs.writeFileSync(path.join(other, 'worker-agent-linux-x64'), 'not the agent');
    expect(spawnSync('sha256sum', ['-c', '-'], { cwd: other, input: text }).status).not.toBe(0);
  });

  it('another version is a 404 that names the version served', async () => {
    for (const version of ['0.0.0-nope', '%E0%A4%A', encodeURIComponent('x'.repeat(500))]) {
      const response = await raw(test.url, binaryPath('x64', version));
      expect(response.status).toBe(404);
      const { error } = JSON.parse(response.body.toString('utf8'));
      expect(error.code).toBe('not_found');
      expect(error.message).toContain(`version ${VERSION} only`);
      expect(error.message).toContain(`/agent/${VERSION}/worker-agent-linux-x64`);
      expect(error.message.length).toBeLessThan(400);
    }
  });

  it('an architecture not built here, or unknown, is a 404 naming what is available', async () => {
    for (const arch of ['arm64', 'riscv64']) {
      for (const suffix of ['', '.sha256']) {
        const response = await raw(test.url, `${binaryPath(arch)}${suffix}`);
        expect(response.status).toBe(404);
        const { error } = JSON.parse(response.body.toString('utf8'));
        expect(error.code).toBe('not_found');
        expect(error.message).toContain(`linux-${arch}`);
        expect(error.message).toContain('available: linux-x64');
      }
    }
  });

  it('without a sidecar the SHA-256 is computed from the file, and again when the file changes', async () => {
    fs.writeFileSync(arm64, crypto.randomBytes(100_000));
    const first = await sha256OfDownload(`${test.url}${binaryPath('arm64')}`);
    expect(first.status).toBe(200);
    expect(first.headers['x-checksum-sha256']).toBe(sha256Of(arm64));
    expect(first.sha256).toBe(sha256Of(arm64));
    expect((await raw(test.url, `${binaryPath('arm64')}.sha256`)).body.toString('utf8')).toBe(`${sha256Of(arm64)}  worker-agent-linux-arm64\n`);
    // A rebuild: other size, other mtime, so not the cached digest.
    fs.writeFileSync(arm64, crypto.randomBytes(120_000));
    const second = await sha256OfDownload(`${test.url}${binaryPath('arm64')}`);
    expect(second.headers['x-checksum-sha256']).toBe(sha256Of(arm64));
    expect(second.sha256).toBe(sha256Of(arm64));
    expect(second.sha256).not.toBe(first.sha256);
    fs.rmSync(arm64);
    expect((await raw(test.url, binaryPath('arm64'))).status).toBe(404);
  });

  it('other names and methods fall through to the ordinary 404; nothing outside the folder is served', async () => {
    const probes = [
      `/agent/${VERSION}/../outside.txt`,
      `/agent/${VERSION}/..%2F..%2Foutside.txt`,
      `/agent/${VERSION}/worker-agent-linux-x64/../../outside.txt`,
      `/agent/${VERSION}/worker-agent-linux-x64%2F..%2F..%2Foutside.txt`,
      `/agent/${VERSION}/worker-agent-linux-..%2F..%2Foutside.txt`,
      `/agent/${VERSION}/worker-agent-linux-x64.sha256.bak`,
      `/agent/${VERSION}/worker-agent-linux-X64`,
      `/agent/${VERSION}/worker-agent-linux-x64/`,
      `/agent/${VERSION}/bin/worker-agent-linux-x64`,
      `/agent/worker-agent-linux-x64`,
      '/agent/../outside.txt',
      '/agent/',
    ];
    for (const probe of probes) {
      const response = await raw(test.url, probe);
      expect([probe, response.status]).toEqual([probe, 404]);
      const body = response.body.toString('utf8');
      expect(body).not.toContain(OUTSIDE_MARKER);
      expect(JSON.parse(body).error.message).toContain('is not an endpoint');
    }
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const response = await raw(test.url, binaryPath('x64'), method);
      expect(response.status).toBe(404);
      expect(JSON.parse(response.body.toString('utf8')).error.message).toContain('is not an endpoint');
    }
  });

  it('needs no API key, and metrics label it agent_download, never by its path', async () => {
    expect(routeLabel('GET', binaryPath('x64'))).toBe('agent_download');
    expect(routeLabel('GET', '/agent/../../etc/passwd')).toBe('agent_download');
    const metrics = await raw(test.url, '/metrics');
    expect(metrics.body.toString('utf8')).toMatch(/inference_requests_total\{[^}]*route="agent_download"[^}]*status="200"/);
    expect(metrics.body.toString('utf8')).not.toContain('worker-agent-linux');
  });

  it('a client that aborts mid-download leaves no descriptor open', async () => {
    if (openDescriptors(x64) === null) return; // no /proc: nothing to count with
    // The earlier downloads' descriptors close once their streams end.
    await waitFor(() => openDescriptors(x64) === 0, 5_000, 'no descriptor open on the file before the test');
    const { hostname, port } = new URL(test.url);
    await new Promise<void>((resolve, reject) => {
      const request = http.get({ hostname, port, path: binaryPath('x64'), agent: false }, (response) => {
        response.once('data', () => {
          // The server is mid-file: its descriptor is open until the abort reaches it.
          response.pause();
          waitFor(() => openDescriptors(x64) === 1, 5_000, 'the download to hold the file open')
            .then(() => {
              request.destroy();
              resolve();
            }, reject);
        });
      });
      request.on('error', () => undefined);
    });
    await waitFor(() => openDescriptors(x64) === 0, 5_000, 'the aborted download to close the file');
  });
});

describe('the real agent binary (npm run build:agent)', () => {
  const dir = path.join(ROOT, 'dist/bin');
  const file = path.join(dir, 'worker-agent-linux-x64');
  const built = fs.existsSync(file) && fs.existsSync(`${file}.sha256`);
  let test: TestServer;

  beforeAll(async () => {
    if (built) test = await startTestServer({ controlPlane: { agentBinaryDir: dir, localAgents: false } });
  });

  afterAll(async () => {
    await test?.stop();
  });

  (built ? it : it.skip)('is served with the SHA-256 of its sidecar, which its bytes have (downloaded once)', async () => {
    const sidecar = fs.readFileSync(`${file}.sha256`, 'utf8');
    const stated = sidecar.split(/\s+/)[0];
    expect(stated).toMatch(/^[0-9a-f]{64}$/);
    expect((await raw(test.url, `/agent/${VERSION}/worker-agent-linux-x64.sha256`)).body.toString('utf8')).toBe(`${stated}  worker-agent-linux-x64\n`);
    const download = await sha256OfDownload(`${test.url}/agent/${VERSION}/worker-agent-linux-x64`);
    expect(download.status).toBe(200);
    expect(download.headers['x-checksum-sha256']).toBe(stated);
    expect(download.bytes).toBe(fs.statSync(file).size);
    expect(download.sha256).toBe(stated);
  });
});
