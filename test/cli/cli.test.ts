import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OPERATOR_TOKEN } from '../capacity/support/graphql-client';
import { chatLine, jsonl } from '../batches/support/batch-helpers';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';

const CLI = path.join(__dirname, '..', '..', 'dist', 'cli', 'main.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The built CLI (`node dist/cli/main.js`) as a child process against a real server: the
 * environment carries only the server's URL and the tokens a case gives (none of the runner's).
 */
describe('the platform CLI against a real server', () => {
  let test: TestServer;
  let modelId: string;
  let scratch: string;
  const children = new Set<ChildProcessWithoutNullStreams>();

  beforeAll(async () => {
    // Capacity ticks every 200 ms so a scale shows its scaling decision at once.
    test = await startTestServer({ controlPlane: { operatorToken: OPERATOR_TOKEN, capacityIntervalMs: 200 } });
    modelId = test.server.controlPlane.catalog.defaultChatModel().id;
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-test-'));
  });

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await test?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  const environment = (env: Record<string, string>) => {
    const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !['PLATFORM_URL', 'PLATFORM_API_KEY', 'OPERATOR_TOKEN'].includes(name)));
    return { ...base, PLATFORM_URL: test.url, ...env } as NodeJS.ProcessEnv;
  };

  const start = (args: string[], env: Record<string, string> = {}) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: environment(env) });
    children.add(child);
    child.on('exit', () => children.delete(child));
    return child;
  };

  /** Runs the CLI to its end (killed after 20 s). */
  const cli = async (args: string[], env: Record<string, string> = {}): Promise<Run> => {
    const child = start(args, env);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => { stdout += chunk; });
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((resolve) => child.on('close', (exitCode) => resolve(exitCode)));
    clearTimeout(timer);
    return { code, stdout, stderr };
  };

  /** Runs the CLI with --json and expects exit 0; returns the parsed document. */
  const cliJson = async <T = any>(args: string[], env: Record<string, string>): Promise<T> => {
    const run = await cli([...args, '--json'], env);
    if (run.code !== 0) throw new Error(`${args.join(' ')} exited ${run.code}: ${run.stderr}`);
    return JSON.parse(run.stdout) as T;
  };

  const operator = { OPERATOR_TOKEN };

  it('creates a workspace and keys, runs a deployment through scale, pause, resume and delete, and uploads a batch', async () => {
    // workspace create (operator): the first key is printed once; local replicas granted.
    const created = await cliJson(['workspace', 'create', 'acme', '--credit', '10', '--local-replicas', '4'], operator);
    expect(created).toMatchObject({ workspace: { name: 'acme', creditBalance: '10', deletedAt: null }, apiKey: { name: 'first key' }, localReplicas: 4 });
    expect(created.plaintext).toMatch(/^mk-/);
    expect(Object.keys(created).sort()).toEqual(['apiKey', 'localReplicas', 'plaintext', 'workspace']);
    const asAcme = { PLATFORM_API_KEY: created.plaintext };
    const listed = await cliJson(['workspace', 'list'], operator);
    expect(listed).toEqual(expect.arrayContaining([expect.objectContaining({ id: created.workspace.id, name: 'acme' })]));

    // The human form prints the key once, with a warning.
    const human = await cli(['workspace', 'create', 'other'], operator);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/API key:\s+mk-/);
    expect(human.stdout).toMatch(/credit:\s+postpaid/);

    // key create | list | revoke
    const key = await cliJson(['key', 'create', 'ci', '--rpm', '100'], asAcme);
    expect(key).toMatchObject({ apiKey: { name: 'ci', rpmLimit: 100 }, plaintext: expect.stringMatching(/^mk-/) });
    expect((await cliJson<Array<{ id: string }>>(['key', 'list'], asAcme)).map((row) => row.id).sort())
      .toEqual([created.apiKey.id, key.apiKey.id].sort());
    const table = await cli(['key', 'list'], asAcme);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+PREFIX\s+RPM\s+TPD\s+CREATED$/);
    expect(table.stdout).toContain(key.apiKey.displayPrefix);
    expect(await cliJson(['key', 'revoke', key.apiKey.id], asAcme)).toMatchObject({ id: key.apiKey.id, name: 'ci' });
    expect((await cliJson<Array<{ id: string }>>(['key', 'list'], asAcme)).map((row) => row.id)).toEqual([created.apiKey.id]);
    // The revoked key is refused by the server: exit 1 with its code.
    const revoked = await cli(['deployment', 'list'], { PLATFORM_API_KEY: key.plaintext });
    expect(revoked.code).toBe(1);
    expect(revoked.stderr).toContain('UNAUTHENTICATED');

    // deployment create | list | get | scale
    const { deployment } = await cliJson(['deployment', 'create', modelId, '--price-cap', '2', '--min', '1', '--max', '1'], asAcme);
    expect(deployment).toMatchObject({ modelId, status: 'Creating', minReplicas: 1, maxReplicas: 1, autoscale: false, provider: 'local' });
    expect(deployment.baseUrl).toMatch(new RegExp(`/d/${deployment.slug}/v1$`));
    expect(await cliJson(['deployment', 'list'], asAcme)).toEqual([expect.objectContaining({ id: deployment.id, slug: deployment.slug })]);
    const list = await cli(['deployment', 'list'], asAcme);
    expect(list.stdout).toContain(deployment.slug);
    await test.waitForReplicas(deployment.id, 1);
    const scaled = await cliJson(['deployment', 'scale', deployment.id, '--max', '2', '--autoscale'], asAcme);
    expect(scaled).toMatchObject({ id: deployment.id, minReplicas: 1, maxReplicas: 2, autoscale: true });
    const got = await cliJson(['deployment', 'get', deployment.id], asAcme);
    expect(got).toMatchObject({ id: deployment.id, maxReplicas: 2, replicas: expect.arrayContaining([expect.objectContaining({ status: 'Running' })]) });
    expect(Array.isArray(got.scalingDecisions)).toBe(true);

    // batch upload | get: the file and the batch over the OpenAI-compatible endpoints.
    const file = path.join(scratch, 'requests.jsonl');
    fs.writeFileSync(file, jsonl([chatLine('a', 'hello'), chatLine('b', 'world')]));
    const upload = await cli(['batch', 'upload', deployment.slug, file, '--metadata', 'job=nightly'], asAcme);
    expect(upload.code).toBe(0);
    const batchId = upload.stdout.trim();
    expect(batchId).toMatch(/^batch_/);
    let batch: any;
    await waitFor(async () => {
      batch = await cliJson(['batch', 'get', batchId], asAcme);
      return batch.status === 'completed';
    }, 30_000, `batch ${batchId} completed`);
    expect(batch).toMatchObject({
      id: batchId, deploymentId: deployment.id, endpoint: '/v1/chat/completions', metadata: { job: 'nightly' },
      requestCounts: { total: 2, completed: 2, failed: 0 }, outputFileId: expect.stringMatching(/^file-/), errors: null,
    });
    const shown = await cli(['batch', 'get', batchId], asAcme);
    expect(shown.stdout).toMatch(/requests:\s+2 completed, 0 failed of 2/);
    const batchJson = await cliJson(['batch', 'upload', deployment.slug, file, '--endpoint', '/v1/chat/completions'], asAcme);
    expect(batchJson).toMatchObject({ object: 'batch', id: expect.stringMatching(/^batch_/), endpoint: '/v1/chat/completions' });

    // pause | resume | delete
    expect(await cliJson(['deployment', 'pause', deployment.id], asAcme)).toMatchObject({ id: deployment.id, status: 'Paused' });
    const resumed = await cli(['deployment', 'resume', deployment.id], asAcme);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toMatch(new RegExp(`^${deployment.id} Creating( \\(.+\\))?\n$`));
    expect(await cliJson(['deployment', 'delete', deployment.id], asAcme)).toMatchObject({ id: deployment.id, status: 'Deleted' });
    expect(await cliJson(['deployment', 'list'], asAcme)).toEqual([]);
  });

  it('exits 1 with the server\'s code and message, and 2 on usage errors', async () => {
    const badToken = await cli(['deployment', 'list', '--token', 'mk-not-a-key']);
    expect(badToken).toMatchObject({ code: 1, stdout: '' });
    expect(badToken.stderr).toBe('error: UNAUTHENTICATED: incorrect API key provided\n');

    const workspace = await test.createWorkspace();
    const asKey = { PLATFORM_API_KEY: workspace.apiKey };
    const missing = await cli(['deployment', 'get', 'dep_missing'], asKey);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error: NOT_FOUND: /);
    const notOperator = await cli(['workspace', 'create', 'x', '--token', workspace.apiKey]);
    expect(notOperator.code).toBe(1);
    expect(notOperator.stderr).toMatch(/^error: FORBIDDEN: this operation needs the operator token/);
    const badInput = await cli(['deployment', 'create', 'no/such-model', '--price-cap', '1'], asKey);
    expect(badInput.code).toBe(1);
    expect(badInput.stderr).toMatch(/^error: [A-Z_]+: .*\n$/);
    const noFile = await cli(['batch', 'upload', 'some-slug', path.join(scratch, 'absent.jsonl')], asKey);
    expect(noFile.code).toBe(2);

    const unknownFlag = await cli(['deployment', 'list', '--bogus'], asKey);
    expect(unknownFlag.code).toBe(2);
    expect(unknownFlag.stderr).toContain("unknown option '--bogus'");
    expect((await cli(['deploymnt', 'list'], asKey)).code).toBe(2);
    expect((await cli(['deployment', 'scale', 'dep_x', '--min', 'many'], asKey)).code).toBe(2);
    expect((await cli(['deployment', 'create', modelId], asKey)).stderr).toContain("required option '--price-cap <usd>' not specified");
    const noToken = await cli(['key', 'list']);
    expect(noToken).toMatchObject({ code: 2, stderr: 'error: no API key: pass --token or set PLATFORM_API_KEY\n' });

    const help = await cli(['deployment', 'scale', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--min <count>');
    expect(help.stdout).toMatch(/env:\s+PLATFORM_URL/);
    expect(help.stdout).toMatch(/env:\s+PLATFORM_API_KEY/);
    expect(help.stdout).toContain('http://127.0.0.1:8080');
    expect((await cli(['workspace', 'create', '--help'])).stdout).toMatch(/env:\s+OPERATOR_TOKEN/);
  });

  it('follows a deployment: prints its scaling decisions and updates as they come, until stopped', async () => {
    const workspace = await test.createWorkspace();
    const env = { PLATFORM_API_KEY: workspace.apiKey };
    const { id } = await test.createDeployment(workspace);
    await test.waitForReplicas(id, 1);

    const follower = start(['deployment', 'events', id, '--follow', '--json', '--interval', '300'], env);
    const events: any[] = [];
    let buffered = '';
    let stderr = '';
    follower.stderr.on('data', (chunk) => { stderr += chunk; });
    follower.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) events.push(JSON.parse(line));
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => follower.on('exit', (code, signal) => resolve({ code, signal })));
    try {
      await waitFor(() => events.some((event) => event.event === 'deployment'), 10_000, `the follower's first state (${stderr})`);
      expect(events.find((event) => event.event === 'deployment').deployment).toMatchObject({ id, status: 'Running' });

      expect((await cli(['deployment', 'scale', id, '--max', '2'], env)).code).toBe(0);
      await waitFor(() => events.some((event) => event.event === 'deployment' && event.deployment.maxReplicas === 2), 10_000, 'the scale update');
      await waitFor(() => events.some((event) => event.event === 'scalingDecision' && JSON.stringify(event.decision).length > 0
        && Date.parse(event.decision.decidedAt) > 0), 10_000, 'a scaling decision');
      const decision = events.find((event) => event.event === 'scalingDecision');
      expect(decision).toMatchObject({ deploymentId: id, decision: { action: expect.any(String), reason: expect.any(String), explanation: expect.any(String) } });

      expect((await cli(['deployment', 'pause', id], env)).code).toBe(0);
      await waitFor(() => events.some((event) => event.event === 'deployment' && event.deployment.status === 'Paused'), 10_000, 'the Paused update');
      // Each state is printed once, however many times it is seen (subscription and poll).
      const states = events.filter((event) => event.event === 'deployment').map((event) => event.deployment.status);
      expect(states.filter((status) => status === 'Paused')).toHaveLength(1);
    } finally {
      follower.kill('SIGTERM');
    }
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(stderr).toBe('');

    // A follower whose key is revoked ends with exit 1; one whose deployment is deleted, with exit 0.
    const extra = await cliJson(['key', 'create', 'follower'], env);
    const revokedFollower = start(['deployment', 'events', id, '--follow', '--interval', '300'], { PLATFORM_API_KEY: extra.plaintext });
    const deletedFollower = start(['deployment', 'events', id, '--follow', '--interval', '300'], env);
    const outcome = (child: ChildProcessWithoutNullStreams) => {
      let out = '';
      let err = '';
      child.stdout.on('data', (chunk) => { out += chunk; });
      child.stderr.on('data', (chunk) => { err += chunk; });
      return {
        exit: new Promise<{ code: number | null; out: string; err: string }>((resolve) => child.on('close', (code) => resolve({ code, out, err }))),
        printed: () => out,
      };
    };
    const revokedRun = outcome(revokedFollower);
    const deletedRun = outcome(deletedFollower);
    await waitFor(() => revokedRun.printed().includes('Paused') && deletedRun.printed().includes('Paused'), 10_000, 'both followers\' first state');
    expect((await cli(['key', 'revoke', extra.apiKey.id], env)).code).toBe(0);
    const revokedExit = await revokedRun.exit;
    expect(revokedExit.code).toBe(1);
    expect(revokedExit.err).toMatch(/^error: [A-Z_0-9]+: /);

    // Without --follow: the latest decisions and the state, in lines, then exit.
    const once = await cli(['deployment', 'events', id], env);
    expect(once.code).toBe(0);
    expect(once.stdout).toMatch(/ {2}decision {2}\w+ \(\w+\) replicas \d+->\d+/);
    expect(once.stdout).toMatch(new RegExp(`update {4}${id} Paused`));

    expect((await cli(['deployment', 'delete', id], env)).code).toBe(0);
    const deletedExit = await deletedRun.exit;
    expect(deletedExit).toMatchObject({ code: 0, err: '' });
    expect(deletedExit.out).toMatch(new RegExp(`update {4}${id} Deleted`));

    // Following with a bad key fails at the first read, with the server's error.
    const badFollow = await cli(['deployment', 'events', id, '--follow', '--token', 'mk-not-a-key']);
    expect(badFollow).toMatchObject({ code: 1, stderr: 'error: UNAUTHENTICATED: incorrect API key provided\n' });
  });
});
