import fc from 'fast-check';
import type { GraphQLSchema } from 'graphql';
import { introspectedSchema } from '../integration/support/nul-fuzz-cases';
import { graphqlHttpProblem, restProblem, type HttpAnswer } from './support/answer-checks';
import { heapAfterCollection, fuzzSeed, runProperty, type PropertyReport } from './support/fuzz-run';
import { startFuzzTarget, type FuzzTarget } from './support/fuzz-target';
import { operationArbitrary, operationBody, type GraphQLOperation, type GraphQLPools } from './support/graphql-cases';
import { operationCase, transportCases } from './support/graphql-transport';
import { protocolCases, runProtocolCase, WebSocketSession, webSocketProblem } from './support/graphql-ws-session';
import { describeCase, HttpSender, type HttpCase } from './support/http-cases';
import { multipartCases } from './support/multipart-cases';
import { rawCases, sendRaw } from './support/raw-http-cases';
import { mediaJsonCases, readRouteCases, sharedChatCases, textRouteCases } from './support/rest-routes';

/**
 * Cases per property in `npm test`: 10,000 or more in all. Every case is one request (or one
 * graphql-ws operation or connection); most are refused at once (4xx), some are valid and run
 * on the CPU engines (kept small by construction: a few tokens, ≤ 2 s clips at ≤ 24 fps).
 */
const RUNS = {
  text: 2_000, shared: 1_000, mediaJson: 1_500, multipart: 1_500, readRoutes: 1_500,
  graphql: 2_000, graphqlTransport: 600, webSocket: 300, webSocketProtocol: 150, rawHttp: 150,
};
/** FUZZ_SCALE multiplies every property's runs (a longer run on a developer's machine or a nightly job: FUZZ_SCALE=10). */
const SCALE = Number(process.env.FUZZ_SCALE ?? 1) || 1;
const PROPERTY_NAMES = [
  'POST /d/{slug}/v1/chat/completions, /completions', 'POST /shared/v1/chat/completions', 'POST images/generations, videos/generations (JSON)',
  'POST images/edits, videos (multipart)', 'models, requests, videos, other paths', 'GraphQL operations over HTTP', 'GraphQL transport (/graphql requests)',
  'GraphQL over graphql-ws', 'graphql-ws protocol', 'malformed HTTP/1.1',
];
/** Each property once more, on another seed, before the heap is first measured (caches, lazy modules, JIT). */
const WARM_UP_RUNS = 30;
/**
 * How much the heap may grow from after the warm-up to after the whole run (both after full
 * collections). The server keeps bounded caches (Apollo's parsed documents, the key cache, the
 * metrics' label sets), so some growth is expected; a leak per request of even a few hundred
 * bytes over ~10,000 cases, or anything held per bad body, would pass this.
 */
const HEAP_GROWTH_LIMIT_BYTES = 30 * 1024 * 1024;
/** Server log lines that mean an error reached the edge untyped (rendered as a 500 or INTERNAL_SERVER_ERROR). */
const EDGE_FAILURES = ['unhandled error', 'graphql operation failed'];

/**
 * Bad input at scale: property-based fuzzing (fast-check, a fixed seed, FUZZ_SEED to replay)
 * of every /v1 route (deployment endpoints and the shared endpoint), every multipart form and
 * every GraphQL operation over HTTP and graphql-ws, plus malformed HTTP. The contract (docs/api-contract.md)
 * for every case: never a 5xx, a 4xx in the OpenAI error shape (REST) or GraphQL errors with a
 * code other than INTERNAL_SERVER_ERROR, no stack traces or server paths; afterwards the server
 * answers normally, its heap is flat and its agents are the ones it started with.
 */
describe('bad input at scale', () => {
  const seed = fuzzSeed();
  let target: FuzzTarget;
  let sender: HttpSender;
  let schema: GraphQLSchema;
  let sessions: Record<'owner' | 'operator' | 'guest', WebSocketSession>;
  let agents: Array<{ deploymentId: string; replicaId: string; pid: number | undefined }>;
  let heapAfterWarmUp = 0;
  const reports: PropertyReport[] = [];

  beforeAll(async () => {
    console.log(`fuzz seed ${seed} (run again with FUZZ_SEED=${seed})`);
    target = await startFuzzTarget();
    sender = new HttpSender(target);
    schema = await introspectedSchema({ url: target.url, apiKey: target.owner.apiKey });
    sessions = {
      owner: new WebSocketSession(target.url, `Bearer ${target.owner.apiKey}`),
      operator: new WebSocketSession(target.url, `Bearer ${target.operatorToken}`),
      guest: new WebSocketSession(target.url, `Bearer ${target.guest.apiKey}`),
    };
    const { dispatcher, localProvider } = target.fixture.test.server.controlPlane;
    agents = [target.text, target.image, target.video, target.shared].flatMap((endpoint) => dispatcher.connections(endpoint.id).map((connection) => ({
      deploymentId: endpoint.id, replicaId: connection.replicaId, pid: localProvider?.processOf(connection.replicaId)?.pid,
    })));
  }, 180_000);

  afterAll(async () => {
    for (const session of Object.values(sessions ?? {})) session.close();
    await sender?.close();
    await target?.stop();
    if (reports.length) {
      console.log(`fuzz seed ${seed}\n${reports.map((report) => `${report.name.padEnd(34)} ${String(report.numRuns).padStart(5)} runs ${String(report.executed).padStart(5)} executed `
        + `${String(report.milliseconds).padStart(6)} ms  ${JSON.stringify(report.statuses)}`).join('\n')}\ntotal ${reports.reduce((sum, report) => sum + report.numRuns, 0)} runs`);
    }
  });

  const edgeFailures = () => target.errorLogs.filter((entry) => EDGE_FAILURES.includes(String(entry.msg)));
  const newEdgeFailure = (before: number): string | null => {
    const failures = edgeFailures();
    return failures.length > before ? `the server logged '${failures[before].msg}': ${JSON.stringify(failures[before].err ?? failures[before]).slice(0, 800)}` : null;
  };

  /**
   * A submission the server accepted (202): its id joins the pool path-id generators pick
   * from, and it is canceled at once (still queued, mostly), so valid cases leave the media
   * agents little to render while the run goes on. The cancel's answer is held to the contract too.
   */
  const acceptedSubmission = async (testCase: HttpCase, answer: HttpAnswer): Promise<string | null> => {
    const id = answer.status === 202 ? (JSON.parse(answer.text) as { id?: unknown }).id : undefined;
    const base = /^\/d\/[^/]+\/v1/.exec(testCase.path)?.[0];
    if (typeof id !== 'string' || !base) return null;
    if (target.requestIds.length < 500) target.requestIds.push(id);
    const cancel = await sender.send({ route: 'cancel', method: 'POST', path: `${base}/requests/${id}/cancel`, caller: 'owner' });
    const problem = restProblem(cancel, 'POST');
    return problem ? `canceling the accepted ${id}: ${problem}` : null;
  };

  const checkHttp = (problemOf: (answer: HttpAnswer, method: string) => string | null) => async (testCase: HttpCase, count: (status: number | string) => void) => {
    const before = edgeFailures().length;
    const path = sender.resolvePath(testCase);
    if (process.env.FUZZ_TRACE) require('node:fs').appendFileSync(process.env.FUZZ_TRACE, `${new Date().toISOString()} ${testCase.method} ${path} ${JSON.stringify(testCase.caller)} ${testCase.body?.length ?? 0}\n`);
    let answer: HttpAnswer;
    try {
      answer = await sender.send(testCase);
    } catch (error) {
      count('client error');
      return `${testCase.route}: the request failed (${(error as Error).message})\n${describeCase(testCase, path)}`;
    }
    count(answer.status);
    const problem = problemOf(answer, testCase.method) ?? await acceptedSubmission(testCase, answer) ?? newEdgeFailure(before);
    return problem ? `${testCase.route}: ${problem}\n${describeCase(testCase, path)}\nanswer: ${answer.text.slice(0, 800)}` : null;
  };
  const checkRest = checkHttp(restProblem);
  const checkGraphQL = checkHttp(graphqlHttpProblem);

  const checkWebSocket = async (operation: GraphQLOperation, count: (status: number | string) => void) => {
    const before = edgeFailures().length;
    const session = sessions[operation.caller === 'operator' ? 'operator' : operation.caller === 'guest' ? 'guest' : 'owner'];
    const outcome = await session.run(operationBody(operation), 25);
    count(outcome.running ? 'running' : outcome.closed ? `closed ${outcome.closed.code}` : outcome.messages.at(-1)?.type ?? 'none');
    const problem = webSocketProblem(outcome) ?? newEdgeFailure(before);
    return problem ? `${operation.kind} ${operation.field}: ${problem}\nquery: ${operation.query.slice(0, 600)}\nvariables: ${JSON.stringify(operation.variables)?.slice(0, 600)}\nmessages: ${JSON.stringify(outcome.messages).slice(0, 800)}` : null;
  };

  const pools = (): GraphQLPools => {
    const { decoys } = target;
    return {
      readIds: [target.text.id, target.image.id, target.video.id, target.shared.id, decoys.deploymentId, decoys.apiKeyId, decoys.webhookEndpointId, decoys.staticHostId, ...target.requestIds.slice(0, 20), `shared/${target.models.chat}`],
      writeIds: [decoys.deploymentId, decoys.apiKeyId, decoys.webhookEndpointId, decoys.workspaceId, decoys.staticHostId],
    };
  };
  const sizes = () => {
    const catalog = target.fixture.test.server.controlPlane.catalog;
    return { image: catalog.find(target.models.image)!.sizes, video: catalog.find(target.models.video)!.sizes };
  };

  /** Every property: its name, cases, check. Built when it runs (the pools of ids grow as the run goes). */
  const properties = (): Array<{ name: string; runs: number; run: (seedOf: number, numRuns: number) => Promise<PropertyReport> }> => [
    { name: 'POST /d/{slug}/v1/chat/completions, /completions', runs: RUNS.text, run: (propertySeed, numRuns) => runProperty('text (fast lane)', textRouteCases(target), checkRest, { seed: propertySeed, numRuns }) },
    { name: 'POST /shared/v1/chat/completions', runs: RUNS.shared, run: (propertySeed, numRuns) => runProperty('shared chat', sharedChatCases(target), checkRest, { seed: propertySeed, numRuns }) },
    { name: 'POST images/generations, videos/generations (JSON)', runs: RUNS.mediaJson, run: (propertySeed, numRuns) => runProperty('media JSON', mediaJsonCases(target, sizes()), checkRest, { seed: propertySeed, numRuns }) },
    { name: 'POST images/edits, videos (multipart)', runs: RUNS.multipart, run: (propertySeed, numRuns) => runProperty('multipart forms', multipartCases(target, sizes()), checkRest, { seed: propertySeed, numRuns }) },
    { name: 'models, requests, videos, other paths', runs: RUNS.readRoutes, run: (propertySeed, numRuns) => runProperty('read routes and paths', readRouteCases(target), checkRest, { seed: propertySeed, numRuns }) },
    {
      name: 'GraphQL operations over HTTP', runs: RUNS.graphql,
      run: (propertySeed, numRuns) => runProperty('graphql operations', operationArbitrary(schema, pools()).map(operationCase), checkGraphQL, { seed: propertySeed, numRuns }),
    },
    {
      name: 'GraphQL transport (/graphql requests)', runs: RUNS.graphqlTransport,
      run: (propertySeed, numRuns) => runProperty('graphql transport', transportCases(operationArbitrary(schema, pools(), ['query', 'mutation'])), checkGraphQL, { seed: propertySeed, numRuns }),
    },
    {
      name: 'GraphQL over graphql-ws', runs: RUNS.webSocket,
      run: (propertySeed, numRuns) => runProperty('graphql-ws operations', fc.oneof(
        { arbitrary: operationArbitrary(schema, pools(), ['subscription']), weight: 3 }, { arbitrary: operationArbitrary(schema, pools(), ['query']), weight: 1 },
      ), checkWebSocket, { seed: propertySeed, numRuns }),
    },
    {
      name: 'graphql-ws protocol', runs: RUNS.webSocketProtocol,
      run: (propertySeed, numRuns) => runProperty('graphql-ws protocol', protocolCases(`Bearer ${target.owner.apiKey}`), async (testCase, count) => {
        const before = edgeFailures().length;
        const problem = (await runProtocolCase(target.url, testCase, 60)) ?? newEdgeFailure(before);
        count(problem ? 'problem' : 'ok');
        return problem ? `${problem}\n${JSON.stringify(testCase).slice(0, 800)}` : null;
      }, { seed: propertySeed, numRuns }),
    },
    {
      name: 'malformed HTTP/1.1', runs: RUNS.rawHttp,
      run: (propertySeed, numRuns) => {
        const paths = [`/d/${target.text.slug}/v1/chat/completions`, `/d/${target.image.slug}/v1/images/generations`, `/d/${target.image.slug}/v1/images/edits`, '/graphql', '/shared/v1/chat/completions'];
        const port = Number(new URL(target.url).port);
        return runProperty('malformed HTTP', rawCases(paths, `Bearer ${target.owner.apiKey}`), async (testCase, count) => {
          const before = edgeFailures().length;
          const { status, timedOut } = await sendRaw(port, testCase, 500);
          count(status ?? (timedOut ? 'no answer (timeout)' : 'closed'));
          const problem = (status !== null && status >= 500 ? `HTTP ${status}` : null) ?? newEdgeFailure(before);
          return problem ? `${testCase.label}: ${problem}\n${testCase.requestLine}\n${testCase.headers.join('\n').slice(0, 400)}` : null;
        }, { seed: propertySeed, numRuns });
      },
    },
  ];

  it('warm-up: every property on another seed, then the heap baseline', async () => {
    for (const property of properties()) {
      const report = await property.run(seed + 1, WARM_UP_RUNS);
      console.log(`warm-up ${report.name}: ${report.milliseconds} ms ${JSON.stringify(report.statuses)}`);
    }
    heapAfterWarmUp = heapAfterCollection();
  }, 120_000);

  it.each(PROPERTY_NAMES.map((name, index) => [name, index] as const))('%s', async (name, index) => {
    const property = properties()[index];
    expect(property.name).toBe(name);
    reports.push(await property.run(seed, Math.max(1, Math.round(property.runs * SCALE))));
  }, 300_000);

  it('runs at least 10,000 cases in all', () => {
    expect(Object.values(RUNS).reduce((sum, runs) => sum + runs, 0)).toBeGreaterThanOrEqual(10_000);
    expect(reports.reduce((sum, report) => sum + report.numRuns, 0)).toBeGreaterThanOrEqual(Math.min(1, SCALE) * 10_000);
  });

  it('afterwards: normal requests are answered, the agents are the ones started, nothing untyped reached the edge, and the heap is flat', async () => {
    const chat = await sender.send({ route: 'chat', method: 'POST', path: `/d/${target.text.slug}/v1/chat/completions`, caller: 'owner', headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'still there?' }], max_tokens: 3 })) });
    expect({ status: chat.status, object: JSON.parse(chat.text).object }).toEqual({ status: 200, object: 'chat.completion' });
    const shared = await sender.send({ route: 'shared', method: 'POST', path: '/shared/v1/chat/completions', caller: 'guest', headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ model: `shared/${target.models.chat}`, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })) });
    expect(shared.status).toBe(200);
    const image = await sender.send({ route: 'image', method: 'POST', path: `/d/${target.image.slug}/v1/images/generations`, caller: 'owner', headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ model: target.models.image, prompt: 'a lighthouse', size: '512x512', response_format: 'b64_json' })) });
    expect(image.status).toBe(200);
    const graphql = await sender.send({ route: 'graphql', method: 'POST', path: '/graphql', caller: 'owner', headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ query: '{ deployments { id status } }' })) });
    expect(JSON.parse(graphql.text).data.deployments).toEqual(expect.arrayContaining([target.text, target.image, target.video].map((endpoint) => ({ id: endpoint.id, status: 'Running' }))));

    const { dispatcher, localProvider } = target.fixture.test.server.controlPlane;
    const now = agents.map(({ deploymentId, replicaId }) => {
      const child = localProvider?.processOf(replicaId);
      return { deploymentId, replicaId, pid: child?.pid, running: child !== undefined && child.exitCode === null && child.signalCode === null, connected: dispatcher.connections(deploymentId).some((connection) => connection.replicaId === replicaId) };
    });
    expect(agents.length).toBe(4);
    expect(now).toEqual(agents.map((agent) => ({ ...agent, running: true, connected: true })));

    // Distinct entries, each with where it was thrown.
    const logged = new Set(target.errorLogs.map((entry) => {
      const err = entry.err as { message?: string; stack?: string } | undefined;
      const at = err?.stack?.split('\n').find((line) => /\/(gateway|control-plane|worker-agent)\//.test(line))?.trim();
      return `${String(entry.msg)}: ${err?.message ?? ''}${at ? ` (${at})` : ''}`;
    }));
    expect([...logged]).toEqual([]);

    const heapAfterRun = heapAfterCollection();
    console.log(`server heap (in this process, after full collections): ${(heapAfterWarmUp / 2 ** 20).toFixed(1)} MiB after the warm-up, `
      + `${(heapAfterRun / 2 ** 20).toFixed(1)} MiB after the run (${((heapAfterRun - heapAfterWarmUp) / 2 ** 20).toFixed(1)} MiB)`);
    expect(heapAfterRun - heapAfterWarmUp).toBeLessThan(HEAP_GROWTH_LIMIT_BYTES);
  }, 60_000);
});
