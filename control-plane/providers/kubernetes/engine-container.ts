/**
 * What runs the model in a replica's pod: the catalog entry's container, or the default for its
 * engine kind, with the model id, served name and tensor-parallel size filled in. vLLM and
 * SGLang serve OpenAI's API on one port; the agent beside them reaches it on 127.0.0.1.
 */
import type { CatalogModel } from '../../catalog/catalog';
import type { LoraSettings } from '../../deployments/lora-settings';

export interface EngineContainerSpec {
  readonly image: string;
  readonly command?: string[];
  readonly args: string[];
  readonly port: number;
  /** Variables the engine's container gets beyond the pod's own (vLLM's runtime adapter loading). */
  readonly env?: Readonly<Record<string, string>>;
}

const ENGINE_PORT = 8000;

/** Images by engine kind, pinned (an operator overrides them with `engineImages`). */
export const DEFAULT_ENGINE_IMAGES: Readonly<Record<string, string>> = {
  vllm: 'vllm/vllm-openai:v0.11.0',
  sglang: 'lmsysorg/sglang:v0.5.3-cu126',
};

/**
 * The engine container of a replica of `model` on `gpus` GPUs; null when neither the catalog
 * entry nor the engine kind says how (image and video engines need a `container` entry).
 * `priorityScheduling`: the replica shares idle capacity, so its engine orders work by priority.
 * `lora`: the deployment's adapter capacity; with `maxLoras` > 0 a text engine starts with LoRA
 * on and runtime loading allowed (the agent hot-loads adapters, docs/adapters.md), never a restart.
 */
export function engineContainerFor(
  model: CatalogModel, gpus: number, priorityScheduling: boolean, images: Readonly<Record<string, string>>, lora?: LoraSettings,
): EngineContainerSpec | null {
  const fill = (values: readonly string[]) => values.map((value) => value.replaceAll('{model}', model.id).replaceAll('{gpus}', String(gpus)));
  if (model.container) {
    return {
      image: model.container.image, ...(model.container.command ? { command: fill(model.container.command) } : {}),
      args: fill(model.container.args ?? []), port: model.container.port ?? ENGINE_PORT,
    };
  }
  const image = images[model.engine] ?? DEFAULT_ENGINE_IMAGES[model.engine];
  const embedding = model.task === 'embedding';
  const adapters = !embedding && model.modality === 'text' && lora !== undefined && lora.maxLoras > 0 ? lora : null;
  switch (model.engine) {
    case 'vllm':
      return image ? {
        image,
        args: [
          '--model', model.id, '--served-model-name', model.id, '--tensor-parallel-size', String(gpus), '--port', String(ENGINE_PORT),
          ...(embedding ? ['--task', 'embed'] : []), ...(priorityScheduling ? ['--scheduling-policy', 'priority'] : []),
          ...(adapters ? vllmLoraArgs(adapters) : []),
          ...vllmStructuredArgs(model),
          // A faster weights loader where the catalog names one (docs/autoscaling.md#cold-starts).
          ...(model.loadFormat ? ['--load-format', model.loadFormat] : []),
        ],
        port: ENGINE_PORT,
        // Without it vLLM refuses /v1/load_lora_adapter: adapters could only be named at start.
        ...(adapters ? { env: { VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'True' } } : {}),
      } : null;
    case 'sglang':
      return image ? {
        image, command: ['python3', '-m', 'sglang.launch_server'],
        args: [
          '--model-path', model.id, '--served-model-name', model.id, '--tp', String(gpus), '--host', '0.0.0.0', '--port', String(ENGINE_PORT),
          ...(embedding ? ['--is-embedding'] : []),
          // SGLang serves a higher number first unless told otherwise; the agent sends vLLM's order.
          ...(priorityScheduling ? ['--enable-priority-scheduling', '--schedule-low-priority-values-first'] : []),
          // Its load_lora_adapter endpoint needs the rank and target modules fixed at start.
          ...(adapters ? ['--enable-lora', '--max-loras-per-batch', String(adapters.maxLoras), '--max-lora-rank', String(adapters.maxLoraRank), '--lora-target-modules', 'all'] : []),
          ...(model.toolCallParser ? ['--tool-call-parser', model.toolCallParser] : []),
          ...(model.structuredOutputBackend ? ['--grammar-backend', model.structuredOutputBackend] : []),
        ],
        port: ENGINE_PORT,
      } : null;
    default:
      return image ? { image, args: [], port: ENGINE_PORT } : null;
  }
}

/**
 * vLLM's LoRA capacity: GPU slots, host-memory slots (when any) and the largest rank. vLLM's
 * `--max-cpu-loras` is its whole host-memory cache (the GPU's adapters included; it must be at
 * least `--max-loras` and defaults to it), while `maxCpuLoras` counts the adapters kept beyond
 * the GPU's: the flag gets their sum (8 on the GPU and 32 more: `--max-cpu-loras 40`).
 */
function vllmLoraArgs(lora: LoraSettings): string[] {
  return [
    '--enable-lora', '--max-loras', String(lora.maxLoras),
    ...(lora.maxCpuLoras > 0 ? ['--max-cpu-loras', String(lora.maxLoras + lora.maxCpuLoras)] : []),
    '--max-lora-rank', String(lora.maxLoraRank),
  ];
}

/**
 * vLLM's tool calling and structured outputs as the catalog states them: `tool_choice: "auto"`
 * needs `--enable-auto-tool-choice` with the model's parser (without them vLLM refuses it), and
 * the structured-output backend is pinned rather than left to vLLM's release-dependent "auto".
 */
function vllmStructuredArgs(model: CatalogModel): string[] {
  return [
    ...(model.toolCallParser ? ['--enable-auto-tool-choice', '--tool-call-parser', model.toolCallParser] : []),
    ...(model.structuredOutputBackend ? ['--structured-outputs-config', JSON.stringify({ backend: model.structuredOutputBackend })] : []),
  ];
}
