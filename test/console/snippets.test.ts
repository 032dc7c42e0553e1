import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import type { TestWorkspace } from '../support/test-server';
import { consoleSuite, newPage, screenshot, seriousAccessibilityViolations, signIn } from './support/browser';

const run = promisify(execFile);
const PYTHON = '/usr/bin/python3';

interface Case {
  modelId: string;
  /** The endpoint the curl must call. */
  path: string;
  /** The SDK call the page must show. */
  sdk: string;
  /** What a working answer looks like. */
  check(status: number, body: Record<string, any>): void;
}

const CASES: Case[] = [
  {
    modelId: 'meta-llama/Llama-3.1-8B-Instruct', path: '/chat/completions', sdk: 'client.chat.completions.create(',
    check: (status, body) => {
      expect(status).toBe(200);
      expect(body.choices[0].message.role).toBe('assistant');
    },
  },
  {
    modelId: 'Qwen/Qwen2.5-7B', path: '/completions', sdk: 'client.completions.create(',
    check: (status, body) => {
      expect(status).toBe(200);
      expect(typeof body.choices[0].text).toBe('string');
    },
  },
  {
    modelId: 'BAAI/bge-large-en-v1.5', path: '/embeddings', sdk: 'client.embeddings.create(',
    check: (status, body) => {
      expect(status).toBe(200);
      expect(body.data[0].embedding).toHaveLength(1024);
    },
  },
  {
    modelId: 'black-forest-labs/FLUX.1-schnell', path: '/images/generations', sdk: 'client.images.generate(',
    check: (status, body) => {
      expect(status).toBe(200);
      expect(body.data[0].url).toMatch(/^http/);
    },
  },
  {
    modelId: 'black-forest-labs/FLUX.1-Kontext-dev', path: '/images/edits', sdk: 'client.images.edit(',
    check: (status, body) => {
      expect(status).toBe(200);
      expect(body.data[0].url).toMatch(/^http/);
    },
  },
  {
    // A pinned clip (5 s at 16 fps): the snippet must send them, the defaults would be refused.
    modelId: 'Wan-AI/Wan2.1-T2V-1.3B', path: '/videos', sdk: 'client.videos.create(',
    check: (status, body) => {
      expect(status).toBe(202);
      expect(body).toMatchObject({ object: 'video', status: 'queued' });
    },
  },
];

/**
 * A deployment's page shows the curl and SDK calls of its own task, and each curl works: run
 * as shown (bash, the real curl, API_KEY set) against the running server, whose built-in CPU
 * engine serves every task.
 */
describe('console: endpoint snippets match the task and work', () => {
  const suite = consoleSuite();
  let workspace: TestWorkspace;
  let directory: string;

  beforeAll(async () => {
    workspace = await suite.test.createWorkspace();
    // The image-edit snippet uploads input.png from where it runs.
    directory = fs.mkdtempSync(path.join(os.tmpdir(), 'console-snippets-'));
    await sharp({ create: { width: 512, height: 512, channels: 3, background: { r: 40, g: 90, b: 160 } } }).png().toFile(path.join(directory, 'input.png'));
  });

  afterAll(() => {
    if (directory) fs.rmSync(directory, { recursive: true, force: true });
  });

  it.each(CASES)('$modelId: the $path curl and its SDK call', async ({ modelId, path: endpoint, sdk, check }) => {
    const deployment = await suite.test.createDeployment(workspace, { modelId });
    try {
      await suite.test.waitForReplicas(deployment.id, 1, 60_000);
      const page = await newPage(suite.browser, suite.test.url);
      await signIn(page, workspace.apiKey);
      await page.goto(`/console/deployments/${deployment.id}`);
      const curl = (await page.getByLabel('curl example').textContent())!;
      const python = (await page.getByLabel('OpenAI SDK example').textContent())!;
      expect(curl).toContain(`${deployment.baseUrl.replace(suite.test.url, '')}${endpoint} \\`);
      expect(python).toContain(sdk);
      expect(python).toContain(`model="${modelId}"`);
      if (endpoint !== '/chat/completions') expect(`${curl}\n${python}`).not.toMatch(/chat|messages/);

      // As a user would paste it: the page's text, with the key in the environment.
      const { stdout } = await run('bash', ['-c', `${curl} -sS -o answer.json -w '%{http_code}'`], {
        cwd: directory, env: { ...process.env, API_KEY: workspace.apiKey }, timeout: 60_000,
      });
      check(Number(stdout), JSON.parse(fs.readFileSync(path.join(directory, 'answer.json'), 'utf8')));
      // The SDK call at least parses as Python (running it needs the openai package, which this machine need not have).
      if (fs.existsSync(PYTHON)) await run(PYTHON, ['-c', 'import ast, sys; ast.parse(sys.argv[1])', python]);

      expect(await seriousAccessibilityViolations(page)).toEqual([]);
      if (endpoint === '/embeddings') await screenshot(page, 'deployment-embeddings');
      await page.context().close();
    } finally {
      await suite.test.server.controlPlane.deployments.delete(workspace.workspaceId, deployment.id);
    }
  });
});
