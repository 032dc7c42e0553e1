import type { AgentOptions } from '../agent-options';
import { cpuEngineOptionsFrom } from './cpu-engine-options';
import { CpuEngine } from './cpu-engine';
import type { Engine } from './engine';
import { OpenAiEngine } from './openai-engine';

/** The engine adapter `--engine` names, configured from the agent's options. */
export function createEngine(options: AgentOptions): Engine {
  if (options.engineKind === 'openai') {
    return new OpenAiEngine({
      // loadAgentOptions guarantees the URL for the openai engine.
      url: options.engineUrl as string,
      engineModel: options.engineModel,
      apiKey: options.engineApiKey,
      connections: options.maxConcurrency,
      connectTimeoutMs: options.engineConnectTimeoutMs,
      healthIntervalMs: options.engineHealthIntervalMs,
    });
  }
  return new CpuEngine(cpuEngineOptionsFrom(options), options.engineModel);
}
