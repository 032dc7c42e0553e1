/**
 * The Helm chart's server container, run for real: the rendered Deployment's args and
 * environment (Secrets, the downward API and `$(VAR)` resolved as the kubelet would; the
 * database URL pointed at a test database, the ports at free ones, the mounted volumes at
 * temporary directories) start the compiled server from dist/, as the image runs it from its
 * WORKDIR (laid out like the repository). It must answer the readiness probe's path with 200, the
 * liveness probe's too, and exit 0 within the pod's grace period on SIGTERM (its drain: the
 * first run's local agent included).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../control-plane/database/embedded-database';
import { CHART_DIR, containerEnv, serverContainer } from '../support/helm-chart';
import { renderChart } from '../support/helm-template';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';

const ROOT = path.resolve(__dirname, '../..');

async function within(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const status = (url: string) => fetch(url).then((response) => response.status, () => 0);

describe('the Helm chart\'s server container', () => {
  let server: ChildProcess | undefined;
  let databaseUrl: string | undefined;
  const directories: string[] = [];

  afterEach(async () => {
    if (server && server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
    if (databaseUrl) await dropTestDatabase(databaseUrl);
    for (const directory of directories) fs.rmSync(directory, { recursive: true, force: true });
  });

  it('starts with the rendered args and environment, gets ready on /readyz, and exits 0 on SIGTERM', async () => {
    databaseUrl = await createTestDatabase();
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const manifests = renderChart(CHART_DIR, {
      release: { name: 'it', namespace: 'test' },
      values: { database: { url: databaseUrl }, service: { httpPort, grpcPort } },
    });
    const container = serverContainer(manifests);
    const env = containerEnv(manifests, { POD_IP: '127.0.0.1' });
    // Each volume the container mounts is a directory of its own here.
    for (const mount of container.volumeMounts as { mountPath: string }[]) {
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'helm-server-'));
      directories.push(directory);
      for (const [name, value] of Object.entries(env)) {
        if (value === mount.mountPath || value.startsWith(`${mount.mountPath}/`)) env[name] = directory + value.slice(mount.mountPath.length);
      }
    }
    expect(env).toMatchObject({ DATABASE_URL: databaseUrl, PORT: String(httpPort), GRPC_PORT: String(grpcPort), CLUSTER_ADDRESS: `127.0.0.1:${grpcPort}` });
    expect(container.command).toBeUndefined();
    const [program, ...args] = container.args as string[];
    expect(program).toBe('node');

    let output = '';
    server = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stdout!.on('data', (chunk) => (output += chunk));
    server.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => server!.once('exit', (code) => resolve(code)));
    const running = () => server!.exitCode === null && server!.signalCode === null;

    const probe = (name: 'readinessProbe' | 'livenessProbe' | 'startupProbe') => {
      const { path: probePath, port } = container[name].httpGet as { path: string; port: string };
      const containerPort = (container.ports as { name: string; containerPort: number }[]).find((entry) => entry.name === port)!.containerPort;
      return `http://127.0.0.1:${containerPort}${probePath}`;
    };
    await within(async () => !running() || (await status(probe('readinessProbe'))) === 200, 60_000, `${probe('readinessProbe')} to answer 200`)
      .catch((error) => { throw new Error(`${(error as Error).message}\n${output}`); });
    expect([running(), output.slice(-2000)]).toEqual([true, expect.any(String)]);
    expect(await status(probe('livenessProbe'))).toBe(200);
    expect(await status(probe('startupProbe'))).toBe(200);

    // main.js installs its SIGTERM handler once start-up is over, just after logging it (before,
    // a SIGTERM ends the process at once, by Node's default action).
    await within(() => !running() || output.includes('"msg":"server started"'), 30_000, 'the "server started" log line');
    server.kill('SIGTERM');
    const graceMs = Number(manifests.find(({ object }) => object.kind === 'Deployment')!.object.spec.template.spec.terminationGracePeriodSeconds) * 1000;
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still running'), graceMs)))]);
    clearTimeout(timer);
    expect([code, code === 0 ? '' : output.slice(-2000)]).toEqual([0, '']);
  }, 120_000);
});
