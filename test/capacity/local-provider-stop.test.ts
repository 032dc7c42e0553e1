import path from 'node:path';
import pino from 'pino';
import type { ChildProcess } from 'node:child_process';
import { LocalProvider, type LocalProviderOptions } from '../../control-plane/providers/local-provider';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import type { Replica } from '../../control-plane/replicas/replica.entity';

const AGENT = path.join(__dirname, 'support', 'draining-agent.cjs');
const deployment = { id: 'dep_stop', modelId: 'test-model', workspaceId: 'ws_stop' } as Deployment;

function provider(options: Partial<LocalProviderOptions> = {}): LocalProvider {
  return new LocalProvider({
    controlPlaneAddress: () => '127.0.0.1:1', agentEntry: AGENT, engine: 'cpu', maxConcurrency: () => 1, restartDelayMs: 60_000, ...options,
  }, pino({ level: 'silent' }));
}

/** Starts a stand-in agent and waits for its first line. */
async function started(subject: LocalProvider, id: string, env: Record<string, string>): Promise<ChildProcess> {
  subject.start(deployment, { id } as Replica, 'token', env);
  const child = subject.processOf(id)!;
  await new Promise((resolve) => child.stdout!.once('data', resolve));
  return child;
}

function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

describe('LocalProvider stopping agents', () => {
  let subject: LocalProvider;
  afterEach(async () => subject.stopAll());

  it('lets a given-back agent drain for its own drain timeout, and does not hold the caller while it does', async () => {
    subject = provider({ stopMarginMs: 200 });
    // The agent drains for 3 s; its drain timeout (5 s) allows it. terminate() returns while it drains.
    const child = await started(subject, 'rep_draining', { WORKER_DRAIN_TIMEOUT_MS: '5000', DRAIN_FOR_MS: '3000' });
    const exit = exited(child);
    let exitedFirst = false;
    void exit.then(() => (exitedFirst = true));
    await subject.terminate('rep_draining');
    expect(exitedFirst).toBe(false);
    expect(subject.processOf('rep_draining')).toBeUndefined();
    expect(await exit).toEqual({ code: 0, signal: null });
  });

  it('kills an agent that outlives its drain timeout and the margin', async () => {
    subject = provider({ stopMarginMs: 200 });
    const child = await started(subject, 'rep_stuck', { WORKER_DRAIN_TIMEOUT_MS: '300', DRAIN_FOR_MS: 'never' });
    await subject.terminate('rep_stuck');
    expect(await exited(child)).toEqual({ code: null, signal: 'SIGKILL' });
  });

  it('on stopAll, cuts short agents still draining to the shutdown timeout', async () => {
    subject = provider({ shutdownTimeoutMs: 1_500 });
    const child = await started(subject, 'rep_long', { WORKER_DRAIN_TIMEOUT_MS: '60000', DRAIN_FOR_MS: 'never' });
    await subject.terminate('rep_long');
    const before = Date.now();
    await subject.stopAll();
    expect(await exited(child)).toEqual({ code: null, signal: 'SIGKILL' });
    expect(Date.now() - before).toBeLessThan(30_000);
  });
});
