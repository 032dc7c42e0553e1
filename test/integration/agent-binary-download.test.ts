/**
 * The agent's versioned download route (what a Kubernetes pod's init container fetches): the
 * exact bytes with their SHA-256, a `.sha256` that `sha256sum -c` accepts, HEAD without a body,
 * and 404s that say what is available for another version or architecture.
 */
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { platformVersion } from '../../common/agent-binary';
import { startTestServer, type TestServer } from '../support/test-server';

describe('GET /agent/{version}/worker-agent-linux-{arch}', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bin-'));
  const bytes = crypto.randomBytes(300_000);
  const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
  const version = platformVersion(__dirname);
  let test: TestServer;

  beforeAll(async () => {
    fs.writeFileSync(path.join(dir, 'worker-agent-linux-x64'), bytes);
    test = await startTestServer({ controlPlane: { agentBinaryDir: dir, localAgents: false } as never });
  });

  afterAll(async () => {
    await test?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves the exact bytes with their SHA-256 (computed when there is no sidecar), cacheable for good', async () => {
    const response = await fetch(`${test.url}/agent/${version}/worker-agent-linux-x64`);
    expect(response.status).toBe(200);
    const body = Buffer.from(await response.arrayBuffer());
    expect(body.equals(bytes)).toBe(true);
    expect(response.headers.get('x-checksum-sha256')).toBe(sha256);
    expect(response.headers.get('content-type')).toBe('application/octet-stream');
    expect(response.headers.get('content-length')).toBe(String(bytes.length));
    expect(response.headers.get('cache-control')).toContain('immutable');
    const head = await fetch(`${test.url}/agent/${version}/worker-agent-linux-x64`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(bytes.length));
    expect((await head.arrayBuffer()).byteLength).toBe(0);
  });

  it('its .sha256 is what sha256sum -c checks', async () => {
    const response = await fetch(`${test.url}/agent/${version}/worker-agent-linux-x64.sha256`);
    const text = await response.text();
    expect(text).toBe(`${sha256}  worker-agent-linux-x64\n`);
    const check = spawnSync('sha256sum', ['-c', '-'], { cwd: dir, input: text });
    if (check.error) return; // no coreutils here: the format is asserted above
    expect(check.status).toBe(0);
    fs.writeFileSync(path.join(dir, 'tampered'), Buffer.concat([bytes, Buffer.from('x')]));
    expect(spawnSync('sha256sum', ['-c', '-'], { cwd: dir, input: `${sha256}  tampered\n` }).status).not.toBe(0);
  });

  it('another version or architecture is a 404 naming what there is; other names fall through', async () => {
    const other = await fetch(`${test.url}/agent/0.0.0-nope/worker-agent-linux-x64`);
    expect(other.status).toBe(404);
    expect((await other.json()).error.message).toContain(`version ${version} only`);
    const arch = await fetch(`${test.url}/agent/${version}/worker-agent-linux-arm64`);
    expect(arch.status).toBe(404);
    expect((await arch.json()).error.message).toContain('available: linux-x64');
    for (const probe of [`/agent/${version}/..%2F..%2Fpackage.json`, `/agent/${version}/worker-agent-linux-x64/../../package.json`, '/agent/../package.json']) {
      const response = await fetch(`${test.url}${probe}`);
      expect(response.status).toBe(404);
      expect(await response.text()).not.toContain('"version"');
    }
  });
});
