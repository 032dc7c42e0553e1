/**
 * The worker agent as an operator gets it: the single binary `dist/bin/worker-agent-linux-<arch>`
 * (built by `npm test`'s pretest, worker-agent/packaging/build-agent.ts) run as its own process,
 * never `node dist/…`, joining a real server with a static host's token; and the npm package's layout.
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import sharp from 'sharp';
import { graphqlClient, OPERATOR_TOKEN } from '../capacity/support/graphql-client';
import { FAST_AGENT_ENV, startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';
import { FakeControlPlane, welcomeFrame } from '../worker-agent/support/fake-control-plane';

const ROOT = path.resolve(__dirname, '../..');
const BINARY = path.join(ROOT, 'dist', 'bin', `worker-agent-linux-${process.arch}`);
const PACKAGE_DIR = path.join(ROOT, 'dist', 'agent-package');
const VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version as string;
const CHAT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';

interface Run {
  readonly exited: Promise<number | null>;
  kill(signal: NodeJS.Signals): void;
  stderr(): string;
  stdout(): string;
}

const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-binary-cache-'));
const runs: Array<{ run: Run; child: ReturnType<typeof spawn> }> = [];

/** The binary (or another command) with only PATH, the module cache and `env`; killed after the suite. */
function run(env: Record<string, string>, args: string[] = [], command = BINARY, commandArgs: string[] = []): Run {
  const child = spawn(command, [...commandArgs, ...args], {
    env: { PATH: process.env.PATH ?? '', WORKER_MODULE_CACHE_DIR: cacheDir, ...FAST_AGENT_ENV, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (data: Buffer) => { stderr += data.toString(); });
  child.stdout!.on('data', (data: Buffer) => { stdout += data.toString(); });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const handle: Run = { exited, kill: (signal) => child.kill(signal), stderr: () => stderr, stdout: () => stdout };
  runs.push({ run: handle, child });
  return handle;
}

const lastPlainLine = (text: string) => text.trim().split('\n').filter((line) => !line.startsWith('{')).pop() ?? '';

beforeAll(() => {
  if (!fs.existsSync(BINARY)) throw new Error(`${BINARY} is missing: npm test builds it (npm run build:agent)`);
});

afterAll(async () => {
  for (const { run: handle, child } of runs) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await handle.exited;
  }
  fs.rmSync(cacheDir, { recursive: true, force: true });
});

describe('the single binary', () => {
  it('is one executable file that prints its version (package.json\'s) and protocol, and its help', async () => {
    expect(fs.statSync(BINARY).mode & 0o111).not.toBe(0);
    const version = run({}, ['--version']);
    expect(await version.exited).toBe(0);
    // The binary is the Node that built it, and builds refuse anything older than 24 (.nvmrc).
    expect(version.stdout()).toBe(`worker-agent ${VERSION} (worker protocol 1, Node ${process.version})\n`);
    expect(Number(/Node v(\d+)\./.exec(version.stdout())![1])).toBeGreaterThanOrEqual(24);
    const help = run({}, ['--help']);
    expect(await help.exited).toBe(0);
    expect(help.stdout()).toMatch(/--control-plane \/ WORKER_CONTROL_PLANE/);
    expect(help.stdout()).toMatch(/--join-token \/ WORKER_JOIN_TOKEN/);
  });

  it('exits 2 on bad options, naming what is wrong, and on llama-cpp, which it does not carry', async () => {
    const missing = run({ WORKER_JOIN_TOKEN: 'jt' });
    expect(await missing.exited).toBe(2);
    expect(missing.stderr()).toContain('WORKER_CONTROL_PLANE');
    const llama = run({ WORKER_CONTROL_PLANE: '127.0.0.1:1', WORKER_JOIN_TOKEN: 'jt', WORKER_ENGINE: 'llama-cpp', WORKER_LLAMA_MODEL_PATH: '/nowhere.gguf' });
    expect(await llama.exited).toBe(2);
    expect(llama.stderr()).toMatch(/not in the single binary.*node-llama-cpp/);
  });

  it('refuses a control plane of another protocol version with exit 2, naming both versions', async () => {
    const plane = await FakeControlPlane.start({ answerHello: () => welcomeFrame({ protocolVersion: 2 }) });
    try {
      const agent = run({ WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt' });
      expect(await agent.exited).toBe(2);
      expect(lastPlainLine(agent.stderr())).toMatch(/unsupported_protocol: the control plane speaks worker protocol 2; this agent speaks 1/);
    } finally {
      await plane.close();
    }
  });

  it('reconnects with backoff when the control plane ends its stream, and drains on SIGTERM when idle (exit 0)', async () => {
    const plane = await FakeControlPlane.start();
    try {
      const agent = run({ WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt', WORKER_AGENT_ID: 'agt_binary' });
      const first = await plane.stream(0, 10_000);
      first.end();
      const second = await plane.stream(1, 10_000);
      expect(second.hello).toMatchObject({ agentId: 'agt_binary', agentVersion: VERSION, protocolVersion: 1 });
      expect(agent.stderr()).toMatch(/reconnecting/);
      agent.kill('SIGTERM');
      expect(await agent.exited).toBe(0);
    } finally {
      await plane.close();
    }
  });

  describe('joined to a server with a static host\'s token', () => {
    let test: TestServer;
    let workspace: TestWorkspace;
    let operator: ReturnType<typeof graphqlClient>;
    let graphql: ReturnType<typeof graphqlClient>;

    beforeAll(async () => {
      test = await startTestServer({ controlPlane: { operatorToken: OPERATOR_TOKEN, capacityIntervalMs: 100 } });
      workspace = await test.createWorkspace();
      operator = graphqlClient(test.url, OPERATOR_TOKEN);
      graphql = graphqlClient(test.url, workspace.apiKey);
    });

    afterAll(async () => {
      await test?.stop();
    });

    /** A static host, the binary joined with its token, and a deployment of `modelId` placed on it. */
    async function deployOnBinary(name: string, modelId: string): Promise<{ agent: Run; baseUrl: string }> {
      const registered = await operator(`mutation($name: String!) { registerStaticHost(input: {name: $name, gpuName: "L4", gpuMemoryGb: 24, region: "on-prem", pricePerHour: 0.4}) { hostToken } }`, { name });
      const agent = run({ WORKER_CONTROL_PLANE: test.server.controlPlane.grpcAddress, WORKER_JOIN_TOKEN: registered.data.registerStaticHost.hostToken, WORKER_CPU_TEST_CONTROLS: 'true' });
      const created = await graphql(`mutation($model: String!) { createDeployment(input: {modelId: $model, priceCapPerHour: 1, provider: "static"}) { deployment { id baseUrl } } }`, { model: modelId });
      const { id, baseUrl } = created.data.createDeployment.deployment;
      await test.waitForReplicas(id, 1);
      return { agent, baseUrl };
    }

    it('serves chat, plain and streamed, and an image job (sharp loaded from the binary\'s embedded modules)', async () => {
      const chat = await deployOnBinary('binary-chat', CHAT_MODEL);
      const client = new OpenAI({ baseURL: chat.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
      const plain = await client.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'hello binary' }], max_tokens: 4 });
      expect(plain.choices[0].message.content).toBeTruthy();
      expect(plain.usage!.completion_tokens).toBe(4);
      const stream = await client.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'stream' }], max_tokens: 3, stream: true, stream_options: { include_usage: true } });
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        usage = chunk.usage ?? usage;
      }
      expect(text.length).toBeGreaterThan(0);
      expect(usage!.completion_tokens).toBe(3);

      const image = await deployOnBinary('binary-image', IMAGE_MODEL);
      const images = new OpenAI({ baseURL: image.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
      const result = await images.images.generate({ model: IMAGE_MODEL, prompt: 'a lighthouse', size: '512x512', response_format: 'b64_json' });
      const metadata = await sharp(Buffer.from(result.data![0].b64_json!, 'base64')).metadata();
      expect([metadata.format, metadata.width, metadata.height]).toEqual(['png', 512, 512]);
      // The native modules were written once, whole, to the cache it was given.
      const written = fs.readdirSync(path.join(cacheDir, 'inference-worker-agent'));
      expect(written).toEqual([expect.stringMatching(/^modules-[0-9a-f]{16}$/)]);
      expect(fs.existsSync(path.join(cacheDir, 'inference-worker-agent', written[0], '.complete'))).toBe(true);
    });

    it('drains on SIGTERM: the stream in flight finishes whole, then it exits 0', async () => {
      const { agent, baseUrl } = await deployOnBinary('binary-drain', CHAT_MODEL);
      const client = new OpenAI({ baseURL: baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: CHAT_MODEL, messages: [{ role: 'user', content: 'slowly' }], max_tokens: 8, stream: true, stream_options: { include_usage: true },
        cpu_engine: { tokens_per_second: 10 },
      } as never) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>;
      let signalled = false;
      let finish: string | null | undefined;
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        if (!signalled && chunk.choices[0]?.delta?.content) {
          agent.kill('SIGTERM');
          signalled = true;
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
        usage = chunk.usage ?? usage;
      }
      expect(signalled).toBe(true);
      expect(finish).toBe('length');
      expect(usage!.completion_tokens).toBe(8);
      expect(await agent.exited).toBe(0);
      expect(agent.stderr()).toMatch(/received SIGTERM/);
    });

    it('exits 2 when the server refuses its token', async () => {
      const agent = run({ WORKER_CONTROL_PLANE: test.server.controlPlane.grpcAddress, WORKER_JOIN_TOKEN: 'ht-not-a-host-token' });
      expect(await agent.exited).toBe(2);
      expect(lastPlainLine(agent.stderr())).toMatch(/bad_token/);
    });
  });
});

describe('the npm package', () => {
  it('packs only the agent: its bundle, README, the systemd unit and package.json, with a bin and no server dependency', () => {
    const packed = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: PACKAGE_DIR, env: { ...process.env, npm_config_loglevel: 'silent' } }).toString())[0];
    expect(packed.files.map((file: { path: string }) => file.path).sort()).toEqual(['README.md', 'bin/worker-agent.js', 'package.json', 'worker-agent.service']);
    expect(packed).toMatchObject({ name: 'inference-worker-agent', version: VERSION });
    const manifest = JSON.parse(fs.readFileSync(path.join(PACKAGE_DIR, 'package.json'), 'utf8'));
    expect(manifest.bin).toEqual({ 'inference-worker-agent': 'bin/worker-agent.js' });
    expect(Object.keys(manifest.dependencies)).toEqual(['sharp']);
    expect(manifest.peerDependenciesMeta['node-llama-cpp']).toEqual({ optional: true });
  });

  it('runs from its own directory as npm would install it (its dependencies beside it), not from this repository', async () => {
    const installed = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-package-'));
    try {
      fs.cpSync(PACKAGE_DIR, path.join(installed, 'node_modules', 'inference-worker-agent'), { recursive: true });
      for (const dependency of ['sharp', '@img', 'detect-libc', 'semver']) {
        fs.symlinkSync(path.join(ROOT, 'node_modules', dependency), path.join(installed, 'node_modules', dependency));
      }
      const bin = path.join(installed, 'node_modules', 'inference-worker-agent', 'bin', 'worker-agent.js');
      const version = run({}, ['--version'], bin);
      expect(await version.exited).toBe(0);
      expect(version.stdout()).toBe(`worker-agent ${VERSION} (worker protocol 1, Node ${process.version})\n`);
      const plane = await FakeControlPlane.start();
      try {
        const agent = run({ WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt', WORKER_AGENT_ID: 'agt_from_npm' }, [], process.execPath, [bin]);
        const stream = await plane.stream(0, 10_000);
        expect(stream.hello).toMatchObject({ agentId: 'agt_from_npm', agentVersion: VERSION, protocolVersion: 1, engine: { kind: 'cpu' } });
        agent.kill('SIGTERM');
        expect(await agent.exited).toBe(0);
      } finally {
        await plane.close();
      }
    } finally {
      fs.rmSync(installed, { recursive: true, force: true });
    }
  });
});
