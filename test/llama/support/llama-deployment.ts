import type { CreateDeploymentInput } from '../../../control-plane/deployments/deployment.service';
import { startWithDeployment, type ServerWithDeployment } from '../../support/test-server';
import { openForSuite } from '../../support/suite';
import { modelDirectory, type ModelDirectory } from './tiny-model';

export interface LlamaDeploymentOptions {
  /** Tokens per sequence: the model's training context and the agents' context size. */
  contextSize: number;
  /** Sequences (parallel requests) of each llama.cpp agent. @default 2 */
  parallel?: number;
  /** Over the deployment's defaults (one replica of the local model). */
  deployment?: Partial<CreateDeploymentInput>;
  readyTimeoutMs?: number;
  /** The beforeAll's timeout (jest's default otherwise). */
  timeoutMs?: number;
}

export interface LlamaDeployment extends ServerWithDeployment {
  /** Where the model file was written. */
  models: ModelDirectory;
}

/**
 * What the llama.cpp suites share, for a describe block (openForSuite): a tiny GGUF model
 * written as `file` to a directory of its own, a server whose local provider serves it with
 * llama.cpp agents (one thread each), and a deployment of that local model, ready. After the
 * block the server stops and the directory is removed.
 */
export function llamaDeploymentForSuite(file: string, options: LlamaDeploymentOptions): LlamaDeployment {
  const { contextSize, parallel = 2, deployment, readyTimeoutMs, timeoutMs } = options;
  return openForSuite(async () => {
    const models = modelDirectory();
    const modelPath = models.write(file, { contextLength: contextSize });
    const served = await startWithDeployment({
      controlPlane: { localModelPath: modelPath, localLlamaThreads: 1, localLlamaContextSize: contextSize, localLlamaParallel: parallel },
      deployment: (started) => ({ modelId: started.server.controlPlane.catalog.localModel()!.id, ...deployment }),
      readyTimeoutMs,
    }).catch((error) => {
      models.remove();
      throw error;
    });
    return { ...served, models };
  }, async ({ test, models }) => {
    await test.stop();
    models.remove();
  }, timeoutMs);
}
