import type { CatalogModel } from '../../control-plane/catalog/catalog';

/**
 * The inference endpoints a deployment of `model` answers, for the message of a call to one
 * it does not (chat on an embedding model, embeddings on a chat model, …).
 */
export function servedEndpoints(model: CatalogModel): string {
  switch (model.task) {
    case 'chat': return 'POST /v1/chat/completions and POST /v1/completions';
    case 'completion': return 'POST /v1/completions';
    case 'embedding': return 'POST /v1/embeddings';
    case 'image-generation':
    case 'image-edit': return 'POST /v1/images/generations and POST /v1/images/edits';
    case 'video-generation': return 'POST /v1/videos and POST /v1/videos/generations';
  }
}
