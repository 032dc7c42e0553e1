import { SHARED_MODEL_PREFIX, type InferencePort, type SharedModel } from '../../control-plane/api/inference';
import { STAND_IN_ENGINE_LABEL, STAND_IN_NOTE } from '../stand-in-engine';

/**
 * A shared model in OpenAI's model-object shape, plus its per-token prices (exact decimal
 * strings, USD per 1M tokens) and live availability. `created` is 0: a shared model is a
 * catalog entry, not something created at a time.
 */
export function sharedModelObject(model: SharedModel) {
  const base = `${SHARED_MODEL_PREFIX}${model.modelId}`;
  const pricing = { input_per_million: model.prices.inputPerMillion, output_per_million: model.prices.outputPerMillion, currency: 'USD' };
  // An owner's shared adapter (docs/adapters.md#sharing): `parent` and `root` are the shared base
  // model, an id of this same list that guests can call (the catalog id is not one on /shared/v1).
  const object = model.adapter
    ? {
      id: `${SHARED_MODEL_PREFIX}${model.adapter.id}`, object: 'model', created: Math.floor(model.adapter.createdAt.getTime() / 1000), owned_by: 'shared',
      parent: base, root: base, pricing, availability: model.availability,
    }
    : { id: base, object: 'model', created: 0, owned_by: 'shared', pricing, availability: model.availability };
  // Guests are told, as owners are on GET /v1/models, when placeholder words may answer them.
  return model.standIn ? { ...object, engine: STAND_IN_ENGINE_LABEL, note: STAND_IN_NOTE } : object;
}

/** `GET /shared/v1/models`. */
export function listSharedModels(shared: InferencePort['shared']) {
  return { object: 'list', data: shared.models().map(sharedModelObject) };
}

/** `GET /shared/v1/models/{id}`; the id is `shared/<model-id>`, its slashes raw or percent-encoded. */
export function retrieveSharedModel(shared: InferencePort['shared'], id: string) {
  return sharedModelObject(shared.model(id));
}
