import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import pino, { type Logger } from 'pino';
import type { ControlPlaneOverrides } from '../../control-plane/full-config';
import type { CreateDeploymentInput } from '../../control-plane/deployments/deployment.service';
import type { GatewayConfig } from '../../gateway/gateway-config';
import { startServer, type Server } from '../../gateway/server';
import { UNLIMITED } from '../../control-plane/budgets/budget-kinds';
import { createTestDatabase, dropTestDatabase } from './test-database';
import { openForSuite } from './suite';

export interface TestServerOptions {
  controlPlane?: ControlPlaneOverrides;
  gateway?: Partial<GatewayConfig>;
  /** Reuse a database (restart tests); otherwise a fresh one is created and dropped. */
  databaseUrl?: string;
  /** Reuse a data directory (storage keys, local objects); otherwise a temporary one is made and removed. */
  dataDir?: string;
  /** The server's logger (tests that read the logs); otherwise one at TEST_LOG_LEVEL, silent by default. */
  logger?: Logger;
  /** The environment the server reads its settings from (the standard OTEL_* variables, say); otherwise an empty one. */
  env?: NodeJS.ProcessEnv;
}

export interface TestWorkspace {
  workspaceId: string;
  apiKey: string;
  apiKeyId: string;
}

export interface TestDeployment {
  id: string;
  slug: string;
  /** Its OpenAI base URL on this server: `<server>/d/<slug>/v1`. */
  baseUrl: string;
}

export interface TestServer {
  /**
   * The running server. `server.controlPlane` is the test-only handle to the whole control plane
   * (docs/layers.md#the-door): tests and benches use it to set up and inspect what is behind the
   * door (workspaces, keys, deployments, records, loops). Gateway code never takes it: the gateway
   * is given its ports (control-plane/api/, `gatewayPorts`).
   */
  server: Server;
  url: string;
  databaseUrl: string;
  dataDir: string;
  createWorkspace(limits?: { rpmLimit?: number; tpdLimit?: number }): Promise<TestWorkspace>;
  createDeployment(workspace: TestWorkspace, input?: Partial<CreateDeploymentInput>): Promise<TestDeployment>;
  waitForReplicas(deploymentId: string, count: number, timeoutMs?: number): Promise<void>;
  /** Drops the database and removes the data directory it created, unless asked to keep them (restart tests). */
  stop(options?: { keepDatabase?: boolean; keepData?: boolean }): Promise<void>;
}

/** Test agents reconnect and restart within milliseconds instead of seconds. */
export const FAST_AGENT_ENV = {
  WORKER_RECONNECT_INITIAL_MS: '20',
  WORKER_RECONNECT_MAX_MS: '200',
  WORKER_DRAIN_TIMEOUT_MS: '3000',
};

/** A whole server (gateway + control plane + real agent processes) on port 0 and its own database. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const databaseUrl = options.databaseUrl ?? await createTestDatabase();
  const dataDir = options.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'inference-test-data-'));
  const server = await startServer({
    env: options.env ?? {},
    logger: options.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    controlPlane: {
      databaseUrl, dataDir, grpcPort: 0, heartbeatIntervalMs: 1_000, localRestartDelayMs: 100,
      usageFlushIntervalMs: 20, apiKeyCacheTtlMs: 5_000,
      ...options.controlPlane,
      localAgentEnv: { ...FAST_AGENT_ENV, ...options.controlPlane?.localAgentEnv },
    },
    gateway: { host: '127.0.0.1', port: 0, logLevel: 'silent', ...options.gateway },
  }).catch(async (error) => {
    if (!options.databaseUrl) await dropTestDatabase(databaseUrl);
    if (!options.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    throw error;
  });
  const { controlPlane, gateway } = server;
  return {
    server,
    url: gateway.url,
    databaseUrl,
    dataDir,
    async createWorkspace(limits = {}) {
      const workspace = await controlPlane.workspaces.create('test');
      // The test acts as the operator: its workspaces may run replicas on the host's local capacity.
      await controlPlane.workspaceBudgets.set(workspace.id, 'local_replicas', 'workspace', UNLIMITED);
      const { apiKey, plaintext } = await controlPlane.apiKeys.create(workspace.id, 'test key', limits);
      return { workspaceId: workspace.id, apiKey: plaintext, apiKeyId: apiKey.id };
    },
    async createDeployment(workspace, input = {}) {
      const { deployment } = await controlPlane.deployments.create(workspace.workspaceId, {
        modelId: controlPlane.catalog.defaultChatModel().id, priceCapPerHour: 2, minReplicas: 1, maxReplicas: 1, autoscale: false, ...input,
      });
      return { id: deployment.id, slug: deployment.slug, baseUrl: `${gateway.url}/d/${deployment.slug}/v1` };
    },
    async waitForReplicas(deploymentId, count, timeoutMs = 20_000) {
      await waitFor(() => controlPlane.dispatcher.readyReplicas(deploymentId) >= count, timeoutMs, `${count} ready replica(s) of ${deploymentId}`);
    },
    async stop(stopOptions = {}) {
      await server.stop();
      if (!stopOptions.keepDatabase && !options.databaseUrl) await dropTestDatabase(databaseUrl);
      if (!stopOptions.keepData && !options.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface DeploymentServerOptions extends TestServerOptions {
  /** The workspace key's limits (createWorkspace's). */
  limits?: { rpmLimit?: number; tpdLimit?: number };
  /** The deployment's input over createDeployment's defaults, or a function of the started server for input it decides (its local model). */
  deployment?: Partial<CreateDeploymentInput> | ((test: TestServer) => Partial<CreateDeploymentInput>);
  /** How long the deployment's minReplicas (1 by default) may take to be ready; waitForReplicas's default otherwise. */
  readyTimeoutMs?: number;
}

export interface ServerWithDeployment {
  test: TestServer;
  workspace: TestWorkspace;
  deployment: TestDeployment;
  /** The model the deployment serves (the catalog's default chat model unless the input named one). */
  modelId: string;
  /** The official SDK on the deployment, with the workspace's key and no retries. */
  client: OpenAI;
}

/**
 * The boot most integration tests share: startTestServer, a workspace, one deployment, its
 * minReplicas ready, and an SDK client on it. A failure after the server started stops it before
 * the error is thrown (the caller has no server to stop yet).
 */
export async function startWithDeployment(options: DeploymentServerOptions = {}): Promise<ServerWithDeployment> {
  const { limits, deployment: input = {}, readyTimeoutMs, ...serverOptions } = options;
  const test = await startTestServer(serverOptions);
  try {
    const workspace = await test.createWorkspace(limits);
    const fields = typeof input === 'function' ? input(test) : input;
    const modelId = fields.modelId ?? test.server.controlPlane.catalog.defaultChatModel().id;
    const deployment = await test.createDeployment(workspace, { ...fields, modelId });
    await test.waitForReplicas(deployment.id, fields.minReplicas ?? 1, readyTimeoutMs);
    const client = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    return { test, workspace, deployment, modelId, client };
  } catch (error) {
    await test.stop().catch(() => {});
    throw error;
  }
}

/** startTestServer for a describe block: started in its beforeAll, stopped in its afterAll (openForSuite). */
export function serverForSuite(options: TestServerOptions = {}): TestServer {
  return openForSuite(() => startTestServer(options), (test) => test.stop());
}

/**
 * startWithDeployment for a describe block: started in its beforeAll, stopped in its afterAll
 * (openForSuite). `options` may be a function, called in beforeAll (a model file written then).
 */
export function deploymentForSuite(options: DeploymentServerOptions | (() => DeploymentServerOptions) = {}, timeoutMs?: number): ServerWithDeployment {
  return openForSuite(() => startWithDeployment(typeof options === 'function' ? options() : options), ({ test }) => test.stop(), timeoutMs);
}

export interface ServerRestart {
  /** The first server, with its workspace and deployment (startWithDeployment). */
  start(options?: DeploymentServerOptions): Promise<ServerWithDeployment>;
  /** Stops the first server as an operator would (its agents drain), keeping its database and data directory. */
  stopFirst(): Promise<void>;
  /** A second server on the first one's database and data directory (`options` beside them), and the deployment's base URL on it. */
  startSecond(options?: TestServerOptions): Promise<{ test: TestServer; baseUrl: string }>;
}

/**
 * The two servers of a restart test, for a describe block: after it, whichever still runs is
 * stopped and the database and data directory they shared are removed.
 */
export function restartForSuite(): ServerRestart {
  let first: ServerWithDeployment | undefined;
  let firstRunning = false;
  let second: TestServer | undefined;
  afterAll(async () => {
    if (!first) return;
    if (firstRunning) await first.test.stop({ keepDatabase: true, keepData: true });
    await second?.stop();
    await dropTestDatabase(first.test.databaseUrl);
    fs.rmSync(first.test.dataDir, { recursive: true, force: true });
  });
  const started = () => {
    if (!first) throw new Error('restartForSuite: start() the first server first');
    return first;
  };
  return {
    async start(options) {
      first = await startWithDeployment(options);
      firstRunning = true;
      return first;
    },
    async stopFirst() {
      await started().test.stop({ keepDatabase: true, keepData: true });
      firstRunning = false;
    },
    async startSecond(options = {}) {
      const { test, deployment } = started();
      second = await startTestServer({ ...options, databaseUrl: test.databaseUrl, dataDir: test.dataDir });
      return { test: second, baseUrl: `${second.url}/d/${deployment.slug}/v1` };
    },
  };
}

export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
