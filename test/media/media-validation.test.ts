import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
const EDIT_MODEL = 'black-forest-labs/FLUX.1-Kontext-dev';
const PINNED_VIDEO = 'Wan-AI/Wan2.1-T2V-1.3B';
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4e00000000049454e44ae426082', 'hex');

/**
 * Every validation rule of the image and video endpoints answers 4xx with the OpenAI error
 * body naming the field — before anything is queued (no record is created for bad input).
 */
describe('image and video validation', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  const deployments: Record<string, { id: string; baseUrl: string }> = {};

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { localAgents: false } });
    workspace = await test.createWorkspace();
    for (const modelId of [IMAGE_MODEL, EDIT_MODEL, PINNED_VIDEO, 'Lightricks/LTX-Video', 'meta-llama/Llama-3.1-8B-Instruct']) {
      deployments[modelId] = await test.createDeployment(workspace, { modelId });
    }
  });

  afterAll(async () => {
    await test?.stop();
  });

  const json = (modelId: string, path: string, body: unknown, query = '') => fetch(`${deployments[modelId].baseUrl}${path}${query}`, {
    method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  const form = (modelId: string, path: string, fields: Record<string, string | Blob>, query = '') => {
    const data = new FormData();
    for (const [name, value] of Object.entries(fields)) data.append(name, value);
    return fetch(`${deployments[modelId].baseUrl}${path}${query}`, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}` }, body: data });
  };
  const expectError = async (response: Response, status: number, code: string, param: string | null, messageParts: string[] = []) => {
    const body = await response.json();
    expect({ status: response.status, code: body.error?.code, param: body.error?.param }).toEqual({ status, code, param });
    for (const part of messageParts) expect(body.error.message).toContain(part);
  };
  const image = () => new Blob([PNG], { type: 'image/png' });

  it.each([
    ['missing model', {}, 400, 'invalid_request', 'model'],
    ['unknown model', { model: 'acme/nope', prompt: 'x' }, 404, 'model_not_found', 'model'],
    ['a text model', { model: 'meta-llama/Llama-3.1-8B-Instruct', prompt: 'x' }, 400, 'wrong_modality', 'model'],
    ['another image model', { model: EDIT_MODEL, prompt: 'x' }, 400, 'model_mismatch', 'model'],
    ['missing prompt', { model: IMAGE_MODEL }, 400, 'invalid_request', 'prompt'],
    ['empty prompt', { model: IMAGE_MODEL, prompt: '  ' }, 400, 'invalid_request', 'prompt'],
    ['prompt not a string', { model: IMAGE_MODEL, prompt: 5 }, 400, 'invalid_request', 'prompt'],
    ['n = 0', { model: IMAGE_MODEL, prompt: 'x', n: 0 }, 400, 'invalid_request', 'n'],
    ['n = 11', { model: IMAGE_MODEL, prompt: 'x', n: 11 }, 400, 'invalid_request', 'n'],
    ['n fractional', { model: IMAGE_MODEL, prompt: 'x', n: 1.5 }, 400, 'invalid_request', 'n'],
    ['response_format', { model: IMAGE_MODEL, prompt: 'x', response_format: 'jpeg' }, 400, 'invalid_request', 'response_format'],
    ['steps', { model: IMAGE_MODEL, prompt: 'x', steps: 0 }, 400, 'invalid_request', 'steps'],
    ['guidance_scale', { model: IMAGE_MODEL, prompt: 'x', guidance_scale: 'high' }, 400, 'invalid_request', 'guidance_scale'],
    ['seed', { model: IMAGE_MODEL, prompt: 'x', seed: -1 }, 400, 'invalid_request', 'seed'],
    ['storage_credential_id not an integer', { model: IMAGE_MODEL, prompt: 'x', storage_credential_id: 'abc' }, 400, 'invalid_request', 'storage_credential_id'],
  ])('generations: %s', async (_name, body, status, code, param) => {
    await expectError(await json(IMAGE_MODEL, '/images/generations', body), status, code, param);
  });

  it('generations: a size the model does not offer is 422 size_not_supported listing the sizes in order', async () => {
    await expectError(await json(IMAGE_MODEL, '/images/generations', { model: IMAGE_MODEL, prompt: 'x', size: '256x256' }), 422, 'size_not_supported', 'size',
      ['512x512, 768x768, 768x1024, 1024x768, 1024x1024']);
  });

  it('generations: a private or plain-HTTP webhook_url is 422 invalid_webhook_url', async () => {
    for (const webhook of ['http://hooks.example.com/x', 'https://127.0.0.1/x', 'https://169.254.169.254/x']) {
      await expectError(await json(IMAGE_MODEL, '/images/generations', { model: IMAGE_MODEL, prompt: 'x', webhook_url: webhook }), 422, 'invalid_webhook_url', 'webhook_url');
    }
  });

  it('generations: an unknown storage credential is 422 storage_credential_not_found', async () => {
    await expectError(await json(IMAGE_MODEL, '/images/generations', { model: IMAGE_MODEL, prompt: 'x', storage_credential_id: 9999 }), 422, 'storage_credential_not_found', 'storage_credential_id');
  });

  it('generations: malformed JSON, a non-object body and a bad async flag are 400', async () => {
    const response = await fetch(`${deployments[IMAGE_MODEL].baseUrl}/images/generations`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' }, body: '{"model":',
    });
    await expectError(response, 400, 'invalid_json', null);
    await expectError(await json(IMAGE_MODEL, '/images/generations', [1, 2]), 400, 'invalid_request', null);
    await expectError(await json(IMAGE_MODEL, '/images/generations', { model: IMAGE_MODEL, prompt: 'x' }, '?async=maybe'), 400, 'invalid_request', 'async');
  });

  it('generations: Idempotency-Key on a sync call is refused, naming the header', async () => {
    const response = await fetch(`${deployments[IMAGE_MODEL].baseUrl}/images/generations`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json', 'idempotency-key': 'k1' },
      body: JSON.stringify({ model: IMAGE_MODEL, prompt: 'x' }),
    });
    await expectError(response, 400, 'invalid_request', 'Idempotency-Key');
  });

  it('edits: field and model rules', async () => {
    await expectError(await form(EDIT_MODEL, '/images/edits', { model: EDIT_MODEL, prompt: 'x' }), 400, 'invalid_request', 'image');
    await expectError(await form(EDIT_MODEL, '/images/edits', { model: EDIT_MODEL, prompt: 'x', image: new Blob([Buffer.from('not an image')], { type: 'image/png' }) }), 400, 'invalid_request', 'image');
    await expectError(await form(IMAGE_MODEL, '/images/edits', { model: IMAGE_MODEL, prompt: 'x', image: image() }), 400, 'image_input_unsupported', 'model');
    await expectError(await form(EDIT_MODEL, '/images/edits', { model: EDIT_MODEL, prompt: 'x', image: image(), mask: image() }, '?async=true'), 400, 'async_mask_unsupported', 'mask');
    await expectError(await form(EDIT_MODEL, '/images/edits', { model: EDIT_MODEL, prompt: 'x', image: image(), size: '768x768' }), 422, 'size_not_supported', 'size', ['512x512, 1024x1024']);
    await expectError(await form(EDIT_MODEL, '/images/edits', { model: EDIT_MODEL, prompt: 'x', image: image(), n: 'two' }), 400, 'invalid_request', 'n');
    await expectError(await json(EDIT_MODEL, '/images/edits', { model: EDIT_MODEL, prompt: 'x' }), 400, 'invalid_request', null);
  });

  it('videos: resolution, pinned duration and fps rules (the contract\'s video rules 1 and 2)', async () => {
    await expectError(await form(PINNED_VIDEO, '/videos', { model: PINNED_VIDEO, prompt: 'x', seconds: '5', size: '1280x720' }), 422, 'resolution_not_supported', 'size', ['480x832, 832x480']);
    await expectError(await form(PINNED_VIDEO, '/videos', { model: PINNED_VIDEO, prompt: 'x', seconds: '6', size: '832x480' }), 422, 'duration_mismatch', 'seconds', ['5']);
    await expectError(await form(PINNED_VIDEO, '/videos', { model: PINNED_VIDEO, prompt: 'x', seconds: '5.4', size: '832x480', fps: '24' }), 422, 'fps_mismatch', 'fps', ['16']);
    // fps defaults to the contract's 24 (docs/api-contract.md#videos) on both routes, so leaving it out on a 16 fps model is a mismatch too.
    await expectError(await form(PINNED_VIDEO, '/videos', { model: PINNED_VIDEO, prompt: 'x', seconds: '5', size: '832x480' }), 422, 'fps_mismatch', 'fps', ['fps must be 16', 'omitted']);
    await expectError(await json(PINNED_VIDEO, '/videos/generations', { model: PINNED_VIDEO, prompt: 'x', resolution: '832x480' }), 422, 'fps_mismatch', 'fps', ['fps must be 16', 'omitted']);
    await expectError(await json(PINNED_VIDEO, '/videos/generations', { model: PINNED_VIDEO, prompt: 'x', resolution: '832x480', duration: 4.4 }), 422, 'duration_mismatch', 'duration');
    await expectError(await json(PINNED_VIDEO, '/videos/generations', { model: PINNED_VIDEO, prompt: 'x' }), 422, 'resolution_not_supported', 'resolution', ['480x832, 832x480']);
    await expectError(await json('Lightricks/LTX-Video', '/videos/generations', { model: 'Lightricks/LTX-Video', prompt: 'x', resolution: '100x100' }), 422, 'resolution_not_supported', 'resolution',
      ['480x704, 704x480, 720x1280, 1280x720']);
  });

  it('videos: required fields and references', async () => {
    await expectError(await form(PINNED_VIDEO, '/videos', { model: PINNED_VIDEO, prompt: 'x', size: '832x480' }), 400, 'invalid_request', 'seconds');
    await expectError(await form(PINNED_VIDEO, '/videos', { model: PINNED_VIDEO, prompt: 'x', seconds: '5' }), 400, 'invalid_request', 'size');
    await expectError(await form(PINNED_VIDEO, '/videos', { model: PINNED_VIDEO, prompt: 'x', seconds: 'five', size: '832x480' }), 400, 'invalid_request', 'seconds');
    await expectError(await form(PINNED_VIDEO, '/videos', { model: PINNED_VIDEO, prompt: 'x', seconds: '5', size: '832x480', input_reference: image() }), 400, 'image_input_unsupported', 'input_reference');
    await expectError(await json('Lightricks/LTX-Video', '/videos/generations', { model: 'Lightricks/LTX-Video', prompt: 'x', input_reference: 'https://example.com/a.png' }), 400, 'invalid_request', 'input_reference');
    await expectError(await json(IMAGE_MODEL, '/videos/generations', { model: IMAGE_MODEL, prompt: 'x' }), 400, 'wrong_modality', 'model');
  });

  it('requests: list parameters are checked; unknown ids are 404; nothing was queued by any bad request above', async () => {
    const get = (path: string) => fetch(`${deployments[IMAGE_MODEL].baseUrl}${path}`, { headers: { authorization: `Bearer ${workspace.apiKey}` } });
    await expectError(await get('/requests?status=done'), 400, 'invalid_request', 'status', ['queued, running, succeeded, failed, canceled']);
    await expectError(await get('/requests?limit=0'), 400, 'invalid_request', 'limit', ['1 to 200']);
    await expectError(await get('/requests?limit=201'), 400, 'invalid_request', 'limit');
    await expectError(await get('/requests?limit=abc'), 400, 'invalid_request', 'limit');
    await expectError(await get('/requests/req_0123456789abcdef01234567'), 404, 'not_found', 'id');
    await expectError(await get('/requests/not-an-id'), 404, 'not_found', 'id');
    await expectError(await get('/videos/req_0123456789abcdef01234567'), 404, 'not_found', 'id');
    const all = await (await get('/requests')).json();
    expect(all).toEqual({ object: 'list', data: [] });
    expect(await test.server.controlPlane.requestRecords.repository.count()).toBe(0);
  });
});
