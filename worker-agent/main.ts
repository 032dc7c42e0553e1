/**
 * Worker agent entry point: `node dist/worker-agent/main.js --control-plane host:port
 * --join-token X [--engine cpu|openai|llama-cpp --engine-url URL --model-path FILE]`, and the
 * same in the single binary and the npm package (worker-agent/packaging). Only composes; exit
 * codes: 0 after a drain, 1 on an unexpected error, 2 on bad options, a Reject that retrying
 * cannot fix (bad token, another protocol version) or an engine this build does not carry,
 * 3 when the engine cannot start (e.g. a model that does not load), 4 when, with
 * WORKER_EXIT_WITH_PARENT, the process that spawned the agent is gone.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { agentOptionsUsage, loadAgentOptions, type AgentOptions } from './agent-options';
import { AgentSession, type AgentExit } from './agent-session';
import { readAgentVersion } from './agent-version';
import { createEngine, createModelCache } from './create-engine';
import { StartupPhases } from './startup-phases';
import { EngineStartError } from './engines/engine-start-error';
import { LoadingEngine } from './engines/loading-engine';
import { OptionsError } from './option-fields';
import { runningAsBinary } from './packaging/embedded-modules';
import { IN_PROCESS_ENGINE_KINDS } from '../common/engine-kinds';
import { parentPipeProblem, watchParentPipe } from '../common/parent-pipe';
import { PROTOCOL_VERSION } from '../proto/worker/v1';
import { OtelSettingError, readTracingSettings, type TracingSettings } from '../common/tracing/otel-settings';
import { Tracing } from '../common/tracing/tracing';

/** The agent's `service.name` when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names it. */
const AGENT_SERVICE_NAME = 'inference-worker-agent';

const EXIT_BAD_CONFIG = 2;
const EXIT_ENGINE_START_FAILED = 3;
const EXIT_PARENT_GONE = 4;
const EXIT_FORCED = 130;
/** How long an exiting agent waits for its last spans to be exported. */
const TRACE_FLUSH_MS = 2_000;

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (argv.includes('--help')) {
    process.stdout.write(`usage: worker-agent [flags]; every option also has an environment variable:\n${agentOptionsUsage()}\n`);
    return 0;
  }
  if (argv.includes('--version')) {
    process.stdout.write(`worker-agent ${readAgentVersion()} (worker protocol ${PROTOCOL_VERSION}, Node ${process.version})\n`);
    return 0;
  }
  let options: AgentOptions;
  let tracingSettings: TracingSettings | null;
  try {
    options = loadAgentOptions(argv, env);
    // The same OTEL_* variables as the server (docs/tracing.md): off unless an exporter is configured.
    tracingSettings = readTracingSettings(env, AGENT_SERVICE_NAME);
  } catch (error) {
    if (!(error instanceof OptionsError) && !(error instanceof OtelSettingError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return EXIT_BAD_CONFIG;
  }
  if (options.engineKind === 'llama-cpp' && runningAsBinary()) {
    process.stderr.write('invalid worker agent options: --engine llama-cpp is not in the single binary (llama.cpp\'s native builds are'
      + ' hundreds of MB per GPU flavour); run the npm package with node-llama-cpp installed beside it:'
      + ' npx -p inference-worker-agent -p node-llama-cpp@3.22.1 inference-worker-agent --engine llama-cpp ...\n');
    return EXIT_BAD_CONFIG;
  }
  const pipeProblem = options.exitWithParent ? parentPipeProblem() : undefined;
  if (pipeProblem) {
    process.stderr.write(`invalid worker agent options: --exit-with-parent / WORKER_EXIT_WITH_PARENT: ${pipeProblem}\n`);
    return EXIT_BAD_CONFIG;
  }
  const tracing = tracingSettings ? Tracing.start(tracingSettings, AGENT_SERVICE_NAME, { 'service.instance.id': options.agentId, 'service.version': readAgentVersion() }) : null;
  // Synchronous so the last lines reach stderr before process.exit. With tracing, a job's lines name its span.
  const logger = pino({ name: 'worker-agent', level: options.logLevel, base: { agentId: options.agentId }, ...(tracing ? { mixin: tracing.logFields } : {}) },
    pino.destination({ dest: 2, sync: true }));
  // Joins before the model is loaded, so the replica shows the download and load as they go,
  // and each start-up phase with its time (a heartbeat goes out as each begins and ends).
  // The engine's records say `component: "engine"`: the control plane shows them as the engine's lines of the replica's log.
  const modelCache = createModelCache(options);
  const phases = new StartupPhases(() => session.heartbeatNow());
  const engine = new LoadingEngine(createEngine(options, logger.child({ component: 'engine' }), modelCache), () => session.heartbeatNow(), phases);
  // The CPU engines use no GPU, so a GPU box running them for tests must not advertise its GPUs.
  const gpus = IN_PROCESS_ENGINE_KINDS.includes(engine.kind) ? [] : options.gpus;
  const session = new AgentSession({
    options: { ...options, gpus }, engine, agentVersion: readAgentVersion(), logger, tracing, startupPhases: phases,
    // What the host's cache holds goes in every Hello; the files this agent fetched are labelled with the model it serves.
    cachedModels: () => modelCache.cachedModels(),
    onWelcome: (welcome) => {
      try {
        modelCache.servedAs(welcome.model);
      } catch (error) {
        logger.warn({ err: error }, 'could not label the weights cache with the served model');
      }
    },
  });
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting without waiting for in-flight jobs');
      process.exit(EXIT_FORCED);
    }
    void session.stop(`received ${signal}`);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  if (options.exitWithParent) {
    // No drain: the stream went with the parent server, so no result could reach anyone, and
    // an agent left running would redial that address and join whatever listens there next.
    watchParentPipe(process.stdin, (how) => {
      logger.warn({ how }, 'the process that spawned the agent is gone: exiting without a drain');
      process.exit(EXIT_PARENT_GONE);
    });
  }
  logger.info({ controlPlane: options.controlPlaneAddress, engine: engine.kind, maxConcurrency: options.maxConcurrency }, 'worker agent starting');
  try {
    await engine.prepare();
    session.start();
    // A drain (SIGTERM) while the model still loads ends the agent without waiting for the load.
    const early = await Promise.race([engine.start().then(() => undefined), session.finished]);
    if (early) {
      await engine.close();
      return reported(early);
    }
  } catch (error) {
    if (!(error instanceof EngineStartError)) throw error;
    // One plain line, last: the local provider shows an agent's last line on its replica.
    // No drain: nothing was assigned before the engine was ready, and exiting ends the stream.
    logger.error({ err: error }, 'engine failed to start');
    process.stderr.write(`worker agent: engine ${engine.kind} failed to start: ${error.message}\n`);
    return EXIT_ENGINE_START_FAILED;
  }
  const exit = await session.finished;
  await engine.close();
  // The spans of the last jobs go out before the process does (bounded: an unreachable collector cannot hold the exit).
  await Promise.race([tracing?.shutdown().catch(() => {}), sleep(TRACE_FLUSH_MS)]);
  return reported(exit);
}

/** One plain line, last, as for an engine that cannot start: what an operator reads first. */
function reported(exit: AgentExit): number {
  if (exit.exitCode !== 0) process.stderr.write(`worker agent: ${exit.reason}\n`);
  return exit.exitCode;
}

main(process.argv.slice(2), process.env).then(
  (exitCode) => process.exit(exitCode),
  (error: unknown) => {
    process.stderr.write(`worker agent failed: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
