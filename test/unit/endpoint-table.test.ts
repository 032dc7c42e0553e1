import {
  DEPLOYMENT_ENDPOINTS, deploymentRouteLabel, endpointList, fastLanePaths, matchDeploymentEndpoint, servedEndpoints,
} from '../../gateway/v1/endpoint-table';

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
});
