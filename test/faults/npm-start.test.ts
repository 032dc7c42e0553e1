/**
 * `npm start` stops as a whole: a SIGTERM or SIGINT to npm's own pid (what `kill`, a supervisor
 * or a CI timeout sends) used to end npm and its shell only, leaving the launcher orphaned and
 * the server answering /readyz 200 long after. Now the launcher notices its parent's death and
 * stops the server, which drains its agents and exits, within the shutdown deadline.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../../control-plane/database/embedded-database';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';
import { childrenOf, commandLineOf, isRunning, killQuietly, within } from './support/processes';
import { freshDataDir, killTree } from './support/server-process';

const ROOT = path.resolve(__dirname, '../..');
const SHUTDOWN_TIMEOUT_MS = 10_000;

/** Every running descendant of `pid`. */
function descendantsOf(pid: number): number[] {
  return childrenOf(pid).flatMap((child) => [child, ...descendantsOf(child)]);
}

describe('npm start, signalled at npm\'s own pid', () => {
  let databaseUrl: string;
  let dataDir: string;
  let npm: ChildProcess | undefined;
  let tree: number[] = [];

  beforeEach(async () => {
    databaseUrl = await createTestDatabase();
    dataDir = freshDataDir();
  });

  afterEach(async () => {
    if (npm?.pid && isRunning(npm.pid)) killTree(npm.pid);
    for (const pid of tree) if (isRunning(pid)) killQuietly(pid);
    await dropTestDatabase(databaseUrl);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it.each<NodeJS.Signals>(['SIGTERM', 'SIGINT'])('%s to npm stops the launcher, the server and its agents within the drain deadline', async (signal) => {
    const port = await freePort();
    npm = spawn('npm', ['start'], {
      cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH, DATABASE_URL: databaseUrl, DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String(port), GRPC_HOST: '127.0.0.1', GRPC_PORT: '0',
        LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      },
    });
    let output = '';
    npm.stdout!.on('data', (part) => (output += part));
    npm.stderr!.on('data', (part) => (output += part));
    const url = `http://127.0.0.1:${port}`;
    await within(async () => (await fetch(`${url}/readyz`)).status === 200, 90_000, `the server to answer /readyz (output: ${output.slice(-500)})`, 100);
    // The first run's replica: an agent process under the server.
    await within(() => descendantsOf(npm!.pid!).some((pid) => commandLineOf(pid).includes('dist/worker-agent/main.js')), 30_000, 'the first run\'s agent', 100);
    tree = descendantsOf(npm.pid!);
    const server = tree.find((pid) => commandLineOf(pid).includes('dist/gateway/main.js'));
    expect(server).toBeDefined();
    expect(output).not.toMatch(/building|warning/i);

    const startedAt = performance.now();
    process.kill(npm.pid!, signal);
    const stoppedMs = await within(() => tree.every((pid) => !isRunning(pid)), SHUTDOWN_TIMEOUT_MS + 5_000, `the whole tree to stop after ${signal} (output: ${output.slice(-800)})`, 50);
    expect(stoppedMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 2_000);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    console.info(`[faults] npm start, ${signal} to npm: ${tree.length} processes stopped in ${Math.round(performance.now() - startedAt)} ms`);
  }, 150_000);
});
