import type { CatalogModel } from '../catalog/catalog';

/**
 * The inference endpoints of a deployment's `/v1` (under the workspace base URL `/v1` too) and
 * the catalog tasks whose deployments answer each: which OpenAI endpoints a model serves,
 * declared once. The gateway's endpoint table (gateway/v1/endpoint-table.ts) takes these rows
 * as they are and adds how it routes them; admission's messages name a model's endpoints from
 * them (servedEndpoints). The other endpoints (listing, records, files, batches) answer every
 * deployment and are the gateway's alone.
 */
export interface InferenceEndpoint<Name extends InferenceEndpointName = InferenceEndpointName> {
  readonly name: Name;
  readonly method: 'POST';
  /** Under the base URL. */
  readonly path: string;
  /** Catalog tasks whose deployments answer it. */
  readonly tasks: readonly CatalogModel['task'][];
}

export type InferenceEndpointName =
  | 'chat.completions' | 'completions' | 'responses.create' | 'embeddings'
  | 'images.generations' | 'images.edits' | 'videos.create' | 'videos.generations';

const IMAGE_TASKS: readonly CatalogModel['task'][] = ['image-generation', 'image-edit'];

/** In the order the served-endpoint messages list them. */
export const INFERENCE_ENDPOINTS: { readonly [Name in InferenceEndpointName]: InferenceEndpoint<Name> } = {
  'chat.completions': { name: 'chat.completions', method: 'POST', path: '/chat/completions', tasks: ['chat'] },
  completions: { name: 'completions', method: 'POST', path: '/completions', tasks: ['chat', 'completion'] },
  // The Responses API (control-plane/responses): turns run as chat through the same pipeline.
  'responses.create': { name: 'responses.create', method: 'POST', path: '/responses', tasks: ['chat'] },
  embeddings: { name: 'embeddings', method: 'POST', path: '/embeddings', tasks: ['embedding'] },
  'images.generations': { name: 'images.generations', method: 'POST', path: '/images/generations', tasks: IMAGE_TASKS },
  'images.edits': { name: 'images.edits', method: 'POST', path: '/images/edits', tasks: IMAGE_TASKS },
  'videos.create': { name: 'videos.create', method: 'POST', path: '/videos', tasks: ['video-generation'] },
  'videos.generations': { name: 'videos.generations', method: 'POST', path: '/videos/generations', tasks: ['video-generation'] },
};

/**
 * The inference endpoints a deployment of `model` answers, for the message of a call to one
 * it does not (chat on an embedding model, embeddings on a chat model, …).
 */
export function servedEndpoints(model: Pick<CatalogModel, 'task'>): string {
  return Object.values(INFERENCE_ENDPOINTS).filter((endpoint) => endpoint.tasks.includes(model.task))
    .map((endpoint) => `${endpoint.method} /v1${endpoint.path}`).join(' and ');
}
