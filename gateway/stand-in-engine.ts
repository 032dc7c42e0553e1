import type { Deployment } from '../control-plane/api/inference';
import { type DeploymentEngines, STAND_IN_ENGINE_KIND } from '../control-plane/api/startup';

/**
 * The agents' built-in CPU engine (`--engine cpu`) is a stand-in: it needs no weights and
 * answers with placeholder words (with exact token counts), whatever model the deployment is
 * labelled with. The label stays the catalog's real model id, so clients and examples work
 * unchanged the day real weights serve it; the surfaces a user reads first say it instead.
 */
export { STAND_IN_ENGINE_KIND };

/** `engine` of a stand-in deployment's model object in GET /v1/models. */
export const STAND_IN_ENGINE_LABEL = 'cpu-stand-in';

/** The one line to real answers: a GGUF file served by llama.cpp on the CPU (README, "Real inference on CPU with llama.cpp"). */
export const REAL_ANSWERS_COMMAND = 'LOCAL_MODEL_PATH=/path/to/model.gguf npm start';

export const STAND_IN_NOTE = 'Served by the built-in CPU stand-in engine: it has no model weights and answers with placeholder words, '
  + `not this model's. For real answers, serve a GGUF file with llama.cpp: ${REAL_ANSWERS_COMMAND}`;

/**
 * The deployments a stand-in answers for, by id. A deployment with some stand-in replicas
 * among real ones counts: any of its answers may be placeholder words.
 */
export async function standInDeployments(engines: DeploymentEngines, deployments: readonly Deployment[]): Promise<ReadonlySet<string>> {
  const served = await Promise.all(deployments.map(async (deployment) => ((await engines.of(deployment)).has(STAND_IN_ENGINE_KIND) ? deployment.id : null)));
  return new Set(served.filter((id): id is string => id !== null));
}
