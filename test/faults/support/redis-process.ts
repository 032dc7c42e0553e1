/**
 * A redis-server of a fault test's own, on a free port of 127.0.0.1, without persistence
 * (`--save '' --appendonly no`): killed, it comes back empty, as a cache node that was replaced.
 *
 * The fault suite needs the binary (installed on CI and on the development machine): without
 * it the test fails saying so, rather than being skipped, since a skipped fault proves nothing.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { freePort } from '../../../control-plane/database/embedded-database';
import { TcpBalancer } from './tcp-balancer';
import { within } from './processes';

export class RedisProcess {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  static async start(): Promise<RedisProcess> {
    const found = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
    if (found.error) {
      throw new Error(`redis-server is not installed or not on PATH (${found.error.message}): the Redis fault test needs it (Debian/Ubuntu: apt-get install redis-server)`);
    }
    const redis = new RedisProcess(await freePort());
    await redis.restart();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts it (again) on the same port; resolves once it accepts connections. */
  async restart(): Promise<void> {
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    let output = '';
    child.stdout!.on('data', (part) => (output += part));
    child.stderr!.on('data', (part) => (output += part));
    const exited = () => child.exitCode !== null || child.signalCode !== null;
    await within(async () => exited() || !(await TcpBalancer.refuses(this.port)), 10_000, 'redis-server to accept connections', 20);
    if (exited()) throw new Error(`redis-server exited at start: ${output}`);
  }

  /** kill -9; resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async dispose(): Promise<void> {
    await this.kill();
  }
}
