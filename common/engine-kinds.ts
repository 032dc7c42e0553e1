/**
 * Engine kinds, listed once. Two vocabularies:
 * - what a worker agent runs: `WORKER_ENGINE` / `--engine`, reported as `Hello.engine.kind`, and
 *   what this server starts its local agents with (`LOCAL_ENGINE`);
 * - what serves a catalog model on a GPU host: the catalog's `engine` field.
 * "Priority" below: the engine can run a shared replica's owner jobs before its guests' (shared
 * serving, docs/shared-serving.md).
 */

/** The engine adapters of the worker agent. */
export const AGENT_ENGINE_KINDS = [
  // Built-in, weights-free: placeholder words, right-sized vectors, an acted-out model load.
  // In-process; priority always (its queue is the agent's own).
  'cpu',
  // Any OpenAI-compatible HTTP engine (vLLM, SGLang, TEI, a llama.cpp server) at WORKER_ENGINE_URL.
  // Priority only when it was started with priority scheduling (WORKER_ENGINE_PRIORITY_SCHEDULING).
  'openai',
  // A GGUF file run by node-llama-cpp on the CPU. In-process; priority always (the agent's own queue).
  'llama-cpp',
] as const;

export type AgentEngineKind = (typeof AGENT_ENGINE_KINDS)[number];

/** Agent engines that run inside the agent process: they use no GPU, and their queue is the agent's own. */
export const IN_PROCESS_ENGINE_KINDS: readonly AgentEngineKind[] = ['cpu', 'llama-cpp'];

/**
 * Engines the catalog's models name. The catalog field stays an open string (an operator's
 * catalog may name others); these are the ones the platform knows something about.
 */
export const CATALOG_ENGINE_KINDS = [
  // vLLM (chat, completions, embeddings). Priority with `--scheduling-policy priority`.
  'vllm',
  // SGLang (chat, completions). Priority with `--enable-priority-scheduling --schedule-low-priority-values-first`.
  'sglang',
  // Image and video pipelines (Hugging Face diffusers). No priority scheduling.
  'diffusers',
  // A local GGUF file (LOCAL_MODEL_PATH, `source.kind: gguf`), run by the agents' `llama-cpp` engine. Not shareable.
  'llama-cpp',
] as const;

export type CatalogEngineKind = (typeof CATALOG_ENGINE_KINDS)[number];

/** Catalog engines whose servers schedule by request priority, so their models can be shared. */
export const PRIORITY_CATALOG_ENGINE_KINDS: readonly CatalogEngineKind[] = ['vllm', 'sglang'];

/**
 * Catalog engines that parse tool calls out of a model's text with a per-model parser named in
 * the catalog (`toolCallParser`): their models refuse `tools` without one.
 */
export const TOOL_PARSER_CATALOG_ENGINE_KINDS: readonly CatalogEngineKind[] = ['vllm', 'sglang'];
