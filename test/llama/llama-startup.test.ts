import fs from 'node:fs';
import OpenAI from 'openai';
import { Catalog } from '../../control-plane/catalog/catalog';
import { loadControlPlaneConfig } from '../../control-plane/config/control-plane-config';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { PROJECT_ROOT } from '../../control-plane/project-root';
import { DeploymentEngines } from '../../control-plane/replicas/deployment-engines';
import { localEngineEnv } from '../../control-plane/providers/local-engine-env';
import { ensureFirstRun } from '../../control-plane/workspaces/first-run';
import { firstRunBanner } from '../../gateway/first-run-banner';
import { standInDeployments } from '../../gateway/stand-in-engine';
import { tinyGguf } from '../../worker-agent/llama/tiny-gguf';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';
import { modelDirectory, withU32, type ModelDirectory } from './support/tiny-model';

/**
 * `npm start` with a GGUF file (LOCAL_MODEL_PATH): the first run deploys it on llama.cpp
 * agents, and a model file that is missing or malformed shows on the replica as a clear
 * status (the agent's own line); such a replica never becomes ready, so it is replaced (a
 * start failure, counted) after a back-off that grows, instead of looping hot.
 */
const BACKOFF_BASE_MS = 200;

describe('serving a local GGUF file from start-up', () => {
  let models: ModelDirectory;
  let modelPath: string;
  let test: TestServer;

  beforeAll(async () => {
    models = modelDirectory();
    modelPath = models.write('tiny-startup.gguf');
    test = await startTestServer({
      controlPlane: {
        localModelPath: modelPath, localLlamaThreads: 1, localLlamaContextSize: 512, localLlamaParallel: 1,
        capacityIntervalMs: 100, replicaStartBackoffBaseMs: BACKOFF_BASE_MS, replicaStartBackoffMaxMs: 60_000,
      },
    });
  });

  afterAll(async () => {
    await test?.stop();
    models?.remove();
  });

  /** Replaces the model file with a new inode: agents already running keep their mapped copy. */
  const replaceModel = (bytes: Buffer | null) => {
    const next = `${modelPath}.next`;
    if (bytes) {
      fs.writeFileSync(next, bytes);
      fs.renameSync(next, modelPath);
    } else {
      fs.rmSync(modelPath);
    }
  };

  const replicaOf = async (deploymentId: string) => (await test.server.controlPlane.replicas.list(deploymentId))[0];

  it('first run deploys the GGUF model; the printed URL, key and model work with the SDK', async () => {
    const first = await ensureFirstRun(test.server.controlPlane);
    if (!first.created) throw new Error('expected a first run');
    expect(first.deployment.modelId).toBe('local/tiny-startup');
    const standIn = await standInDeployments(new DeploymentEngines(test.server.controlPlane.replicas, test.server.controlPlane.localProvider), [first.deployment]);
    const banner = firstRunBanner(first, (slug) => `${test.url}/d/${slug}/v1`, `${test.url}/graphql`, (deployment) => standIn.has(deployment.id));
    expect(banner).not.toMatch(/stand-in|placeholder/);
    const apiKey = /API key:\s+(mk-\S+)/.exec(banner)![1];
    const baseUrl = /Base URL:\s+(\S+)/.exec(banner)![1];
    const model = /model: '([^']+)'/.exec(banner)![1];
    expect(model).toBe('local/tiny-startup');
    await test.waitForReplicas(first.deployment.id, 1);
    expect(await replicaOf(first.deployment.id)).toMatchObject({ status: 'Running', engineKind: 'llama-cpp' });
    const client = new OpenAI({ baseURL: baseUrl, apiKey, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello!' }] });
    // No max_tokens: the answer may fill the rest of the 512-token context, never more.
    expect(completion.choices[0].message.content!.length).toBeGreaterThan(0);
    expect(completion.usage!.total_tokens).toBeLessThanOrEqual(512);
  });

  it('a missing model file: the replica says so (exit 3), is replaced as a start failure, and the deployment never turns Running', async () => {
    replaceModel(null);
    const workspace = await test.createWorkspace();
    const deployment = await test.createDeployment(workspace, { modelId: 'local/tiny-startup' });
    await waitFor(async () => (await replicaOf(deployment.id))?.status === 'Terminated', 20_000, 'the replica to be replaced');
    expect(await replicaOf(deployment.id)).toMatchObject({
      startFailure: 'exited', startedAt: null,
      statusReason: `its agent exited before its engine was ready: agent exited with code 3: worker agent: engine llama-cpp failed to start: model file ${modelPath} cannot be read: no such file; replaced`,
    });
    expect((await test.server.controlPlane.deployments.get(workspace.workspaceId, deployment.id)).status).toBe('Creating');
    const refused = await fetch(`${deployment.baseUrl}/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'anyone?' }] }),
    });
    expect(refused.status).toBe(503);
  });

  it('a file that makes llama.cpp abort: a clear replica status, and replacements after a back-off that doubles', async () => {
    replaceModel(withU32(tinyGguf(), 'llama.attention.head_count', 0));
    const workspace = await test.createWorkspace();
    const deployment = await test.createDeployment(workspace, { modelId: 'local/tiny-startup' });
    const replicas = () => test.server.controlPlane.replicas.list(deployment.id);
    // Two failures and the third replica placed after them: two back-offs, the second twice the first.
    // (An agent takes seconds to load llama.cpp and abort on a loaded 2-core machine.)
    await waitFor(async () => {
      const current = await replicas();
      return current.length >= 3 && current.filter((replica) => replica.startFailure === 'exited').length >= 2;
    }, 120_000, 'two replicas replaced and a third placed');
    const all = await replicas();
    const failed = all.filter((replica) => replica.startFailure === 'exited');
    for (const replica of failed) {
      expect(replica.status).toBe('Terminated');
      expect(replica.statusReason).toMatch(/^its agent exited before its engine was ready: agent aborted in native code \(SIGABRT, e\.g\. llama\.cpp on a malformed model file\): .*GGML_ASSERT\(.+\) failed; replaced$/);
    }
    // Each next replica waited out a back-off doubling with each failure in a row (a hot loop would start dozens).
    for (let index = 1; index < all.length; index += 1) {
      expect(all[index].createdAt.getTime() - all[index - 1].terminatedAt!.getTime()).toBeGreaterThanOrEqual(BACKOFF_BASE_MS * 2 ** (index - 1) - 1);
    }
    const view = await test.server.controlPlane.deployments.get(workspace.workspaceId, deployment.id);
    expect(view.status).toBe('Creating');
    await test.server.controlPlane.deployments.delete(workspace.workspaceId, deployment.id);
  }, 150_000);

  it('config: LOCAL_MODEL_PATH is resolved to an absolute path; LOCAL_ENGINE=llama-cpp needs it; none leaves the default', () => {
    expect(loadControlPlaneConfig({ LOCAL_MODEL_PATH: 'models/x.gguf' }).localModelPath).toBe(`${process.cwd()}/models/x.gguf`);
    expect(() => loadControlPlaneConfig({ LOCAL_ENGINE: 'llama-cpp' })).toThrow('LOCAL_ENGINE=llama-cpp needs LOCAL_MODEL_PATH');
    const plain = loadControlPlaneConfig({});
    expect(plain.localEngine).toBe('cpu');
    expect(plain.localModelPath).toBeUndefined();
    const catalog = Catalog.load();
    expect(catalog.withLocalModel(undefined)).toBe(catalog);
    expect(catalog.localModel()).toBeUndefined();
  });

  it('catalog files may hold GGUF entries: paths from the project root, served by llama-cpp agents', () => {
    const file = `${models.directory}/catalog.json`;
    const entry = {
      id: 'local/listed', name: 'Listed', modality: 'text', task: 'chat', engine: 'llama-cpp', official: false, gpuMemoryGb: 0.5,
      inputModalities: ['text'], sizes: [], targetConcurrency: 2, source: { kind: 'gguf', path: 'models/listed.gguf' },
    };
    const image = { ...entry, id: 'image/model', modality: 'image', task: 'image-generation', engine: 'diffusers', sizes: ['512x512'], source: undefined };
    fs.writeFileSync(file, JSON.stringify({ models: [entry, image] }));
    const catalog = Catalog.load(file);
    expect(catalog.get('local/listed').source).toEqual({ kind: 'gguf', path: `${PROJECT_ROOT}/models/listed.gguf` });
    const envOf = localEngineEnv({ localEngine: 'cpu', localLlamaThreads: 1 }, catalog);
    expect(envOf({ modelId: 'local/listed' } as Deployment)).toEqual({
      WORKER_ENGINE: 'llama-cpp', WORKER_LLAMA_MODEL_PATH: `${PROJECT_ROOT}/models/listed.gguf`, WORKER_LLAMA_PARALLEL: '2', WORKER_MAX_CONCURRENCY: '2', WORKER_LLAMA_THREADS: '1',
    });
    expect(envOf({ modelId: 'image/model' } as Deployment)).toEqual({});
    // LOCAL_ENGINE=llama-cpp: every text model runs the file; other models keep the CPU engine.
    const everything = localEngineEnv({ localEngine: 'llama-cpp', localModelPath: '/m.gguf' }, Catalog.load());
    expect(everything({ modelId: Catalog.load().defaultChatModel().id } as Deployment)).toMatchObject({ WORKER_ENGINE: 'llama-cpp', WORKER_LLAMA_MODEL_PATH: '/m.gguf' });
    expect(everything({ modelId: 'black-forest-labs/FLUX.1-schnell' } as Deployment)).toEqual({ WORKER_ENGINE: 'cpu' });
    // Cached sequences beyond the parallel ones: the agent keeps them, its concurrency stays the parallel count.
    const kept = localEngineEnv({ localEngine: 'llama-cpp', localModelPath: '/m.gguf', localLlamaParallel: 2, localLlamaCachedSequences: 6 }, Catalog.load());
    expect(kept({ modelId: Catalog.load().defaultChatModel().id } as Deployment)).toMatchObject({
      WORKER_LLAMA_PARALLEL: '2', WORKER_MAX_CONCURRENCY: '2', WORKER_LLAMA_CACHED_SEQUENCES: '6',
    });
  });
});
