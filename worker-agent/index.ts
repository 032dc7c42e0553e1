/** What other parts of the platform (control plane tests, benches) use from the worker agent. */
export { AgentSession, type AgentExit, type AgentSessionOptions, type AgentSessionDependencies } from './agent-session';
export { loadAgentOptions, agentOptionFields, type AgentOptions } from './agent-options';
export { OptionsError } from './option-fields';
export type { Engine, EngineJob, EngineSink, EngineResult, EngineHealthReport } from './engines/engine';
export { EngineFailure } from './engines/engine-failure';
export { CpuEngine } from './engines/cpu-engine';
export { OpenAiEngine, type OpenAiEngineOptions } from './engines/openai-engine';
export { createEngine } from './create-engine';
export { countTokens, tokenize } from './engines/cpu-tokenizer';
export {
  loadCpuEngineOptions, DEFAULT_CPU_ENGINE_OPTIONS, type CpuEngineOptions, type CpuEngineBehaviour,
} from './engines/cpu-engine-options';
export { startCpuEngineServer, type CpuEngineServer, type CpuEngineServerOptions } from './engines/cpu-engine-server';
