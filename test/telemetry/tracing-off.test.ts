import { startWithDeployment, type ServerWithDeployment } from '../support/test-server';

/** Tracing off (the default, no OTEL_* exporter): answers carry their request id and no trace context, whatever the caller sent. */
describe('tracing off', () => {
  let served: ServerWithDeployment;

  beforeAll(async () => {
    served = await startWithDeployment();
  });

  afterAll(async () => {
    await served?.test.stop();
  });

  it('answers on the fast lane and on Koa with x-request-id and no traceparent', async () => {
    expect(served.test.server.controlPlane.tracing).toBeNull();
    const headers = { authorization: `Bearer ${served.workspace.apiKey}`, 'content-type': 'application/json', traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
    const chat = await fetch(`${served.deployment.baseUrl}/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }) });
    await chat.arrayBuffer();
    const models = await fetch(`${served.deployment.baseUrl}/models`, { headers });
    await models.arrayBuffer();
    const refused = await fetch(`${served.deployment.baseUrl}/chat/completions`, { method: 'POST', headers, body: '{"messages": 7}' });
    await refused.arrayBuffer();
    expect([chat.status, models.status, refused.status]).toEqual([200, 200, 400]);
    for (const response of [chat, models, refused]) {
      expect(response.headers.get('x-request-id')).toMatch(/^req_/);
      expect(response.headers.get('traceparent')).toBeNull();
    }
  });
});
