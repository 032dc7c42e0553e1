import {
  DEPLOYMENT_ENDPOINTS, deploymentRouteLabel, endpointList, fastLanePaths, matchDeploymentEndpoint, matchSharedEndpoint,
  SHARED_ENDPOINTS, sharedEndpointList, sharedFastLaneEndpoint, sharedRouteLabel,
} from '../../gateway/v1/endpoint-table';
import { INFERENCE_ENDPOINTS, servedEndpoints } from '../../control-plane/openai/inference-endpoints';

/** The one table every piece of route knowledge reads: each derived view must agree with it. */
describe('endpoint table', () => {
  it('matches each declared endpoint by method and path, with its parameter still encoded', () => {
    expect(matchDeploymentEndpoint('GET', '/models/meta-llama/Llama-3.1-8B')).toMatchObject({ endpoint: { name: 'models.retrieve' }, param: 'meta-llama/Llama-3.1-8B' });
    expect(matchDeploymentEndpoint('GET', '/videos/req_1%2F2/content')).toMatchObject({ endpoint: { name: 'videos.content' }, param: 'req_1%2F2' });
    expect(matchDeploymentEndpoint('POST', '/videos/generations')?.endpoint.name).toBe('videos.generations');
    expect(matchDeploymentEndpoint('GET', '/videos/generations')?.endpoint.name).toBe('videos.retrieve');
    expect(matchDeploymentEndpoint('POST', '/requests/req_1')).toBeNull();
    expect(matchDeploymentEndpoint('DELETE', '/models')).toBeNull();
    for (const endpoint of DEPLOYMENT_ENDPOINTS) {
      const path = endpoint.path.replace('{id}', 'req_1').replace('{model}', 'org/model');
      expect(matchDeploymentEndpoint(endpoint.method, path)?.endpoint.name).toBe(endpoint.name);
    }
  });

  it('labels a path by its endpoint, another method by the path, and anything else v1.other', () => {
    expect(deploymentRouteLabel('GET', '/chat/completions')).toBe('chat.completions');
    expect(deploymentRouteLabel('GET', '/videos')).toBe('videos.retrieve');
    expect(deploymentRouteLabel('POST', '/videos')).toBe('videos');
    expect(deploymentRouteLabel('POST', '/audio/speech')).toBe('v1.other');
  });

  it('gives the fast lane exactly its endpoints, and the 404 and served-endpoint messages every row', () => {
    const lane = fastLanePaths();
    expect(lane.exec('/d/llama-1/v1/chat/completions?x=1')?.slice(1)).toEqual(['llama-1', 'chat/completions']);
    expect(lane.exec('/d/llama-1/v1/completions')?.slice(1)).toEqual(['llama-1', 'completions']);
    expect(lane.exec('/d/llama-1/v1/responses')?.slice(1)).toEqual(['llama-1', 'responses']);
    expect(lane.test('/d/llama-1/v1/responses/resp_1/cancel')).toBe(false);
    expect(lane.test('/d/llama-1/v1/embeddings')).toBe(false);
    expect(endpointList().split(', ')).toHaveLength(DEPLOYMENT_ENDPOINTS.length);
    expect(servedEndpoints({ task: 'chat' })).toBe('POST /v1/chat/completions and POST /v1/completions and POST /v1/responses');
    expect(servedEndpoints({ task: 'embedding' })).toBe('POST /v1/embeddings');
    expect(servedEndpoints({ task: 'video-generation' })).toBe('POST /v1/videos and POST /v1/videos/generations');
  });

  it('takes its inference rows whole from the control plane\'s, and no other row names tasks', () => {
    const withTasks = DEPLOYMENT_ENDPOINTS.filter((endpoint) => endpoint.tasks !== undefined);
    expect(withTasks.map(({ name, method, path, tasks }) => ({ name, method, path, tasks }))).toEqual(Object.values(INFERENCE_ENDPOINTS));
  });

  it('matches the shared endpoint\'s rows the same way, labels every path under it `shared`, and gives its fast lane chat and responses', () => {
    expect(matchSharedEndpoint('GET', '/models/shared/meta-llama/Llama-3.1-8B')).toMatchObject({ endpoint: { name: 'models.retrieve' }, param: 'shared/meta-llama/Llama-3.1-8B' });
    expect(matchSharedEndpoint('GET', '/responses/resp_1/input_items')).toMatchObject({ endpoint: { name: 'responses.input_items' }, param: 'resp_1' });
    expect(matchSharedEndpoint('DELETE', '/responses/resp_1/input_items')).toBeNull();
    expect(matchSharedEndpoint('POST', '/embeddings')).toBeNull();
    for (const endpoint of SHARED_ENDPOINTS) {
      const path = endpoint.path.replace('{id}', 'resp_1').replace('{model}', 'shared/org/model');
      expect(matchSharedEndpoint(endpoint.method, path)?.endpoint.name).toBe(endpoint.name);
    }
    for (const [method, rest] of [['POST', '/chat/completions'], ['GET', '/models'], ['DELETE', '/responses/resp_1'], ['POST', '/audio/speech'], ['GET', '']]) {
      expect(sharedRouteLabel(method, rest)).toBe('shared');
    }
    expect(sharedFastLaneEndpoint('/shared/v1/chat/completions?x=1')).toBe('chat.completions');
    expect(sharedFastLaneEndpoint('/shared/v1/responses')).toBe('responses.create');
    expect(sharedFastLaneEndpoint('/shared/v1/responses/resp_1')).toBeUndefined();
    expect(sharedFastLaneEndpoint('/shared/v1/models')).toBeUndefined();
    expect(sharedEndpointList()).toBe('POST /shared/v1/chat/completions, POST /shared/v1/responses, GET /shared/v1/responses/{id}, '
      + 'DELETE /shared/v1/responses/{id}, GET /shared/v1/responses/{id}/input_items, GET /shared/v1/models, GET /shared/v1/models/{model}');
  });
});
