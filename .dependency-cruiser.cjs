/**
 * Which code may import which: `npm run check:deps` (run by .ci/run before the tests) fails on
 * an import circle or on an arrow these rules forbid. docs/layers.md explains the layers.
 *
 * Top-level folders
 *   worker-agent/  imports only worker-agent/, proto/, common/ and packages (it ships alone:
 *                  worker-agent/packaging/build-agent.ts bundles it without the server).
 *   gateway/       never imports worker-agent/ (what both need lives in common/).
 *   control-plane/ never imports gateway/ or worker-agent/, and runs none of their code: it
 *                  builds its batch-line handler itself (the gateway may not import the
 *                  batch-line contract or its implementation), and startControlPlane takes data
 *                  from the gateway (the metrics' route labels), no code.
 *   proto/         imports nothing of ours but proto/ (the wire contract).
 *   common/        code the gateway and the agent (and the control plane) share; imports only
 *                  common/ and packages.
 *   cli/           the platform CLI: imports only cli/ and packages. It talks to a server over
 *                  HTTP (GraphQL, graphql-ws, the OpenAI-compatible endpoints) as the console does,
 *                  never through the server's code.
 *   test/, bench/  nothing else imports them.
 *
 * Control-plane layers, lowest first; an import may point down or sideways (within a layer,
 * without a circle), never up:
 *   core        entities and their stores, the rules that change them (deployments, replicas
 *               and their placement, workspaces, keys), money and the ledger, ids, secrets,
 *               errors, the database helpers and migrations, config parsing, the event bus and
 *               the cluster notifier (events: each module declares its own events on the bus,
 *               so the bus names no module above it), storage, the catalog, and placement/
 *               (which replica takes a piece of work: filter, score, pick; the routing policies).
 *   pipeline    the request path: dispatching jobs to agents, relaying them between servers,
 *               shared serving, media requests, rate limits, usage, admission, batches, responses,
 *               and the OpenAI wire form of requests and answers (openai/).
 *   operations  what runs the platform around the request path: capacity (placement loop,
 *               market, static hosts), providers (agent launchers), autoscaling, webhook
 *               delivery, telemetry, and the composition root (main.ts, which builds
 *               everything; the entity list; the full configuration), and the door (api/:
 *               the ports and types the gateway may import, built on main.ts).
 * The door: the gateway imports control-plane/ only through control-plane/api/ (type imports
 * included): its inference, records and admin ports, the errors it renders and starting the
 * control plane (`gateway-through-the-door`).
 * A control-plane folder or top-level file in no layer is an error too (`layer-unassigned`):
 * a new one is given a layer here, and in docs/layers.md. Circles among the folders (and
 * top-level files) of control-plane/, of gateway/ and of worker-agent/, which these file rules
 * cannot see, are checked by `.ci/dep-report.cjs --check-folders`, also part of `npm run check:deps`.
 */
const LAYERS = {
  core: [
    'errors/', 'cache/', 'ids.ts', 'secrets.ts', 'secret-box.ts', 'server-keys.ts', 'project-root.ts', 'public-url.ts', 'lifecycle.ts',
    'network/', 'database/', 'config/', 'events/', 'catalog/', 'billing/', 'api-keys/', 'workspaces/', 'deployments/',
    'replicas/', 'storage/', 'console/', 'placement/', 'budgets/',
  ],
  pipeline: ['adapters/', 'dispatch/', 'cluster/', 'sharing/', 'requests/', 'rate-limits/', 'usage/', 'pipeline/', 'batches/', 'responses/', 'openai/'],
  operations: ['capacity/', 'providers/', 'autoscaling/', 'webhooks/', 'telemetry/', 'metrics-history/', 'request-log/', 'main.ts', 'data-source.ts', 'full-config.ts', 'api/'],
};

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** `^control-plane/(errors/|ids\.ts$|…)`: the files of the given folders and top-level files. */
const under = (entries) => `^control-plane/(${entries.map((entry) => (entry.endsWith('/') ? escape(entry) : `${escape(entry)}$`)).join('|')})`;
const CORE = under(LAYERS.core);
const PIPELINE = under(LAYERS.pipeline);
const OPERATIONS = under(LAYERS.operations);
const ASSIGNED = under([...LAYERS.core, ...LAYERS.pipeline, ...LAYERS.operations]);

/** Dependencies that are not files of this repository. */
const PACKAGES = ['core', 'npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-bundled', 'npm-no-pkg', 'npm-unknown'];

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import circle (type-only imports count: they tie the modules together just the same).',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to no file or package.',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'worker-agent-self-contained',
      severity: 'error',
      comment: 'The agent ships alone: it imports only worker-agent/, proto/, common/ and packages.',
      from: { path: '^worker-agent/' },
      to: { pathNot: '^(worker-agent|proto|common)/', dependencyTypesNot: PACKAGES },
    },
    {
      name: 'gateway-not-to-worker-agent',
      severity: 'error',
      comment: 'What the gateway and the agent both use lives in common/.',
      from: { path: '^gateway/' },
      to: { path: '^worker-agent/' },
    },
    {
      name: 'control-plane-not-to-edges',
      severity: 'error',
      comment: 'The control plane is used by the gateway and talks to agents over proto/; it imports neither (type-only imports count).',
      from: { path: '^control-plane/' },
      to: { path: '^(gateway|worker-agent)/' },
    },
    {
      name: 'gateway-through-the-door',
      severity: 'error',
      comment: 'The gateway imports the control plane only through control-plane/api/ (its ports, the types they speak, the errors '
        + 'it renders, starting it; type-only imports count): a new need is added to an api module, not imported from the service '
        + '(docs/layers.md#the-door).',
      from: { path: '^gateway/' },
      to: { path: '^control-plane/', pathNot: '^control-plane/api/' },
    },
    {
      name: 'batch-lines-not-from-gateway',
      severity: 'error',
      comment: 'What a batch line means is the control plane\'s own OpenAI request model (openai/batch-lines.ts, built by main.ts): '
        + 'the gateway neither implements the contract the batch runner calls nor builds its handler. The rule above saw no import '
        + 'while ControlPlaneEdges handed the gateway\'s own handler down at start, and the control plane ran gateway code.',
      from: { path: '^gateway/' },
      to: { path: '^control-plane/(batches/batch-line-handler|openai/batch-lines)\\.ts$' },
    },
    {
      name: 'proto-only-proto',
      severity: 'error',
      comment: 'The wire contract depends on nothing of ours.',
      from: { path: '^proto/' },
      to: { pathNot: '^proto/', dependencyTypesNot: PACKAGES },
    },
    {
      name: 'common-is-a-leaf',
      severity: 'error',
      comment: 'common/ is shared by the gateway, the control plane and the agent: it imports only common/ and packages.',
      from: { path: '^common/' },
      to: { pathNot: '^common/', dependencyTypesNot: PACKAGES },
    },
    {
      name: 'cli-over-http',
      severity: 'error',
      comment: 'The CLI is a client of the server\'s HTTP API (GraphQL, graphql-ws, /d/<slug>/v1), like the console: it imports only cli/ and '
        + 'packages, never control-plane/ or gateway/ internals (type-only imports count).',
      from: { path: '^cli/' },
      to: { pathNot: '^cli/', dependencyTypesNot: PACKAGES },
    },
    {
      name: 'not-to-test-or-bench',
      severity: 'error',
      comment: 'Only tests and benchmarks import test/ and bench/.',
      from: { pathNot: '^(test|bench)/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'layer-core-not-up',
      severity: 'error',
      comment: 'Control-plane core (entities, stores, money, ids, config, errors, database, events) imports no pipeline or operations module.',
      from: { path: CORE },
      to: { path: `${PIPELINE}|${OPERATIONS}` },
    },
    {
      name: 'layer-pipeline-not-up',
      severity: 'error',
      comment: 'The control plane\'s request pipeline imports no operations module.',
      from: { path: PIPELINE },
      to: { path: OPERATIONS },
    },
    {
      name: 'layer-unassigned',
      severity: 'error',
      comment: 'Every control-plane folder and top-level file belongs to a layer: add it to LAYERS in .dependency-cruiser.cjs (and docs/layers.md).',
      from: { path: '^control-plane/', pathNot: ASSIGNED },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist)/' },
    // Type-only imports are dependencies too (a cycle through `import type` is still a cycle).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
// For .ci/dep-report.cjs (not a dependency-cruiser option: its schema allows no extra key).
Object.defineProperty(module.exports, 'layers', { value: LAYERS, enumerable: false });
