import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { AppError } from '../errors/app-error';
import { PROJECT_ROOT } from '../project-root';
import { shortened } from '../errors/quote-value';

const modelSchema = z.object({
  id: z.string().min(1),
  name: z.string().min(1),
  modality: z.enum(['text', 'image', 'video']),
  /**
   * What the model does: chat models also serve completions; base models serve only
   * completions; embedding models serve only embeddings.
   */
  task: z.enum(['chat', 'completion', 'embedding', 'image-generation', 'image-edit', 'video-generation']),
  /** What serves the model on a GPU host: usually one of CATALOG_ENGINE_KINDS (common/engine-kinds.ts), any name allowed. */
  engine: z.string().min(1),
  official: z.boolean(),
  gpuMemoryGb: z.number().positive(),
  inputModalities: z.array(z.enum(['text', 'image'])).min(1),
  /** `WIDTHxHEIGHT` sizes (images) or resolutions (videos); empty for text models. */
  sizes: z.array(z.string().regex(/^\d+x\d+$/)),
  /** Pinned native clip spec of a video model; absent when any duration x fps is honoured. */
  videoSpec: z.object({ durationSeconds: z.number().positive(), fps: z.number().int().positive() }).optional(),
  /** Typical seconds one image/video job takes on one replica (the async acknowledgement's estimate). */
  jobSeconds: z.number().positive().optional(),
  /** In-flight requests one replica is sized for (the autoscaler's target). */
  targetConcurrency: z.number().int().positive(),
  sharedPricing: z.object({ inputPerMillion: z.number().nonnegative(), outputPerMillion: z.number().nonnegative() }).optional(),
  /**
   * Where the platform finds the weights. `gguf`: a local GGUF file (relative paths from the
   * project root) that local agents serve with llama.cpp on the CPU. Absent: the engine
   * loads the model by its id (vLLM and other engines on GPU hosts).
   */
  source: z.discriminatedUnion('kind', [z.object({ kind: z.literal('gguf'), path: z.string().min(1) })]).optional(),
  /**
   * The engine container on a Kubernetes GPU node (control-plane/providers/kubernetes): its
   * image, and its command and arguments with `{model}` and `{gpus}` filled in. Absent: the
   * provider's default for the `engine` kind (vLLM, SGLang).
   */
  container: z.object({
    image: z.string().min(1),
    command: z.array(z.string()).optional(),
    args: z.array(z.string()).optional(),
    port: z.number().int().min(1).max(65535).optional(),
  }).strict().optional(),
  /**
   * vLLM / SGLang: the engine's tool-call parser for this model, in that engine's names (vLLM
   * `llama3_json`, `hermes`, `mistral`; SGLang `llama3`, `qwen25`, `mistral`). The engine is
   * started with it (`--tool-call-parser`, and `--enable-auto-tool-choice` on vLLM); absent, the
   * model's chat requests with `tools` are refused (400 naming `tools`).
   */
  toolCallParser: z.string().regex(/^[a-z0-9_]+$/).optional(),
  /**
   * Text models: the architecture as GGUF files name it (`general.architecture`: `llama`,
   * `qwen2`); a GGUF LoRA adapter registered for the model must name the same. Absent: not checked.
   */
  architecture: z.string().regex(/^[a-z0-9_]+$/).optional(),
  /**
   * vLLM: how the engine reads the weights (`--load-format`), where a faster loader than its
   * default applies: `safetensors`, `runai_streamer` (Run:ai's streamer reads tensors concurrently
   * from disk or object storage while they go to the GPU), `fastsafetensors` (GPU Direct Storage),
   * or `auto`. Absent: the flag is not passed (vLLM's own default).
   */
  loadFormat: z.enum(['auto', 'safetensors', 'runai_streamer', 'fastsafetensors']).optional(),
  /** vLLM / SGLang: the structured-output (guided decoding) backend the engine is started with; absent: the engine's default. */
  structuredOutputBackend: z.enum(['xgrammar', 'guidance', 'outlines', 'lm-format-enforcer']).optional(),
  /** An embedding model's vectors and limits; present exactly when `task` is `embedding`. */
  embedding: z.object({
    /** Length of the vectors the model returns. */
    dimensions: z.number().int().positive(),
    /** Tokens one input may hold; a longer input is refused (400), never truncated. */
    maxInputTokens: z.number().int().positive(),
    /**
     * Matryoshka models only: the smallest `dimensions` a request may ask for (any size from
     * this up to `dimensions`). Absent: the request field `dimensions` is refused.
     */
    minDimensions: z.number().int().positive().optional(),
    /** Inputs the engine embeds in one call; the gateway splits larger requests into jobs of this size. */
    maxBatchInputs: z.number().int().positive(),
  }).strict().optional(),
  /**
   * Chat and completion models: what one replica does, measured on the engine and GPU the model
   * is served with (the `slo` autoscaler sizes from it, and a TTFT SLO below what an idle replica
   * can do is refused). Absent: the planning defaults of autoscaling/catalog-service-model.ts
   * (docs/scaling-settings.md#service-model says where every figure comes from).
   */
  service: z.object({
    /** Sequences one replica runs at once; absent: `targetConcurrency`. */
    slots: z.number().int().positive().optional(),
    /** Prompt tokens one replica prefills per second. */
    prefillTokensPerSecond: z.number().positive(),
    /** Output tokens per second per sequence at a full batch. */
    decodeTokensPerSecond: z.number().positive(),
    /** The mean prompt and output of the traffic the figures were measured with. */
    meanPromptTokens: z.number().positive(),
    meanOutputTokens: z.number().positive(),
    /** From ordering a replica to its first request (GPU host, engine start, weights load). */
    startupSeconds: z.number().positive().optional(),
  }).strict().optional(),
}).superRefine((model, context) => {
  if (model.task === 'embedding' && !model.embedding) {
    context.addIssue({ code: z.ZodIssueCode.custom, path: ['embedding'], message: 'an embedding model needs {dimensions, maxInputTokens, maxBatchInputs}' });
  }
  if (model.task !== 'embedding' && model.embedding) {
    context.addIssue({ code: z.ZodIssueCode.custom, path: ['embedding'], message: 'only models whose task is embedding have embedding fields' });
  }
  if (model.embedding?.minDimensions !== undefined && model.embedding.minDimensions > model.embedding.dimensions) {
    context.addIssue({ code: z.ZodIssueCode.custom, path: ['embedding', 'minDimensions'], message: 'minDimensions must not exceed dimensions' });
  }
  if (model.toolCallParser !== undefined && model.task !== 'chat') {
    context.addIssue({ code: z.ZodIssueCode.custom, path: ['toolCallParser'], message: 'only chat models call tools' });
  }
  if (model.service && model.task !== 'chat' && model.task !== 'completion') {
    context.addIssue({ code: z.ZodIssueCode.custom, path: ['service'], message: 'service figures describe chat and completion models (media models state jobSeconds)' });
  }
  if (model.loadFormat !== undefined && model.engine !== 'vllm') {
    context.addIssue({ code: z.ZodIssueCode.custom, path: ['loadFormat'], message: 'only vllm models take a loadFormat (vLLM --load-format)' });
  }
  if (model.task === 'embedding' && model.modality !== 'text') {
    context.addIssue({ code: z.ZodIssueCode.custom, path: ['modality'], message: 'embedding models have modality text' });
  }
});

export type CatalogModel = z.infer<typeof modelSchema>;

/**
 * The TTFT in ms of one replica that is idle: the model's mean prompt prefilled with nothing
 * else running, from its stated service figures; null when the catalog states none. A TTFT SLO
 * below it cannot be met by any number of replicas.
 */
export function idleTtftMs(model: CatalogModel): number | null {
  const service = model.service;
  return service ? Math.ceil((service.meanPromptTokens / service.prefillTokensPerSecond) * 1000) : null;
}

export const DEFAULT_CATALOG_PATH = path.join(PROJECT_ROOT, 'control-plane/catalog/models.json');

/**
 * The model catalog: the checked-in file, plus models an operator registered (kept in the
 * database and applied at start). An operator can also disable a model: it leaves the
 * catalog workspaces see and no new deployment can use it; existing deployments keep serving.
 */
export class Catalog {
  private readonly byId: Map<string, CatalogModel>;
  private readonly disabled = new Set<string>();

  /** @param localModelId the model given at start-up (`LOCAL_MODEL_PATH`), which a first start deploys */
  constructor(models: readonly CatalogModel[], private readonly localModelId?: string) {
    this.byId = new Map(models.map((model) => [model.id, model]));
  }

  /** Every model, disabled ones included. */
  get models(): readonly CatalogModel[] {
    return [...this.byId.values()];
  }

  /** The models new deployments may use. */
  get enabledModels(): readonly CatalogModel[] {
    return this.models.filter((model) => !this.disabled.has(model.id));
  }

  isEnabled(id: string): boolean {
    return this.byId.has(id) && !this.disabled.has(id);
  }

  /** Adds or replaces a model (validated like the file's entries). */
  register(model: unknown): CatalogModel {
    const parsed = modelSchema.safeParse(model);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new AppError('invalid_request', `invalid catalog model: ${issue.path.join('.') || 'model'}: ${issue.message}`, { param: String(issue.path[0] ?? 'model') });
    }
    this.byId.set(parsed.data.id, parsed.data);
    return parsed.data;
  }

  setEnabled(id: string, enabled: boolean): void {
    this.get(id);
    if (enabled) this.disabled.delete(id);
    else this.disabled.add(id);
  }

  static load(file = DEFAULT_CATALOG_PATH): Catalog {
    const parsed = z.object({ models: z.array(modelSchema).min(1) }).parse(JSON.parse(fs.readFileSync(file, 'utf8')));
    return new Catalog(parsed.models.map((model) => (model.source?.kind === 'gguf'
      ? { ...model, source: { ...model.source, path: path.resolve(PROJECT_ROOT, model.source.path) } }
      : model)));
  }

  /** This catalog plus a model given at start-up (a local GGUF file); unchanged without one. */
  withLocalModel(model: CatalogModel | undefined): Catalog {
    if (!model) return this;
    return new Catalog([...this.models.filter((existing) => existing.id !== model.id), model], model.id);
  }

  /** The model given at start-up, if any. */
  localModel(): CatalogModel | undefined {
    return this.localModelId === undefined ? undefined : this.byId.get(this.localModelId);
  }

  find(id: string): CatalogModel | undefined {
    return this.byId.get(id);
  }

  get(id: string): CatalogModel {
    const model = this.byId.get(id);
    if (!model) {
      throw new AppError('model_not_found', `model '${shortened(id)}' is not in the catalog; see the catalog query for the available models`, { param: 'model' });
    }
    return model;
  }

  /** The default model of a fresh install: the first official chat model. */
  defaultChatModel(): CatalogModel {
    const model = this.models.find((candidate) => candidate.task === 'chat' && candidate.official);
    if (!model) throw new Error('the catalog has no official chat model');
    return model;
  }
}
