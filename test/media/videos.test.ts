import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { readMp4Info } from '../../worker-agent/media';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { MediaClient } from './support/media-client';

const PINNED = 'Wan-AI/Wan2.1-T2V-1.3B';
const UNPINNED = 'Lightricks/LTX-Video';
const hasFfprobe = (() => {
  try {
    execFileSync('ffprobe', ['-version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Videos through the official SDK (create, retrieve, download) and the JSON route; the video rules 1–3 of docs/api-contract.md#videos on real files. */
describe('videos', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let pinned: { id: string; baseUrl: string };
  let unpinned: { id: string; baseUrl: string };

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } } });
    workspace = await test.createWorkspace();
    pinned = await test.createDeployment(workspace, { modelId: PINNED });
    unpinned = await test.createDeployment(workspace, { modelId: UNPINNED });
    await test.waitForReplicas(pinned.id, 1);
    await test.waitForReplicas(unpinned.id, 1);
  });

  afterAll(async () => {
    await test?.stop();
  });

  const waitForVideo = async (client: OpenAI, id: string) => {
    let video!: OpenAI.Videos.Video;
    await waitFor(async () => {
      video = await client.videos.retrieve(id);
      return ['completed', 'failed', 'canceled'].includes(video.status);
    }, 30_000, `video ${id}`);
    return video;
  };
  const download = async (client: OpenAI, id: string) => Buffer.from(await (await client.videos.downloadContent(id)).arrayBuffer());

  it('creates, polls and downloads a pinned-spec video with the SDK: native duration and fps, exact frames', async () => {
    const client = new OpenAI({ baseURL: pinned.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const created = await client.videos.create({ model: PINNED, prompt: 'waves on a shore', seconds: '5', size: '832x480', fps: 16 } as never);
    expect(created).toMatchObject({ object: 'video', status: 'queued', model: PINNED, progress: 0, size: '832x480', seconds: '5' });
    expect(created.id).toMatch(/^req_/);
    const done = await waitForVideo(client, created.id);
    expect(done).toMatchObject({ status: 'completed', progress: 100 });
    const file = await download(client, created.id);
    // 5 s at 16 fps = 80 frames, snapped to the 4n+1 grid: 81.
    expect(readMp4Info(file)).toMatchObject({ width: 832, height: 480, frames: 81, fps: 16 });
    if (hasFfprobe) {
      const probePath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'video-')), 'out.mp4');
      fs.writeFileSync(probePath, file);
      const probe = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-count_frames', '-show_streams', '-of', 'json', probePath]).toString());
      expect(probe.streams[0]).toMatchObject({ width: 832, height: 480, nb_read_frames: '81', r_frame_rate: '16/1' });
    }
    // The same video is a request record.
    const record = (await new MediaClient(pinned.baseUrl, workspace.apiKey).get(`/requests/${created.id}`)).body;
    expect(record).toMatchObject({ modality: 'video', status: 'succeeded', output_object_key: `${workspace.workspaceId}/${created.id}/0.mp4` });
  });

  it('honours any duration × fps on an unpinned model, snapping frames to 4n+1; image-to-video with input_reference', async () => {
    const client = new OpenAI({ baseURL: unpinned.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const reference = await sharp({ create: { width: 640, height: 480, channels: 3, background: '#d02020' } }).png().toBuffer();
    const created = await client.videos.create({
      model: UNPINNED, prompt: 'a red balloon rising', seconds: '2', size: '704x480', fps: 10,
      input_reference: await toFile(reference, 'reference.png', { type: 'image/png' }),
    } as never);
    expect((await waitForVideo(client, created.id)).status).toBe('completed');
    const file = await download(client, created.id);
    // 2 s × 10 fps = 20 frames → nearest 4n+1 is 21.
    expect(readMp4Info(file)).toMatchObject({ width: 704, height: 480, frames: 21, fps: 10 });
  });

  it('the JSON route answers with the acknowledgement and snaps the resolution down to multiples of 32', async () => {
    const client = new MediaClient(unpinned.baseUrl, workspace.apiKey);
    const submitted = await client.post('/videos/generations', { model: UNPINNED, prompt: 'city lights', duration: 1, fps: 8 });
    expect(submitted.status).toBe(202);
    expect(submitted.body).toEqual({ id: expect.stringMatching(/^req_/), object: 'inference.request', status: 'queued', modality: 'video', estimated_seconds: expect.any(Number) });
    const record = await client.waitForRecord(submitted.body.id);
    expect(record.status).toBe('succeeded');
    const file = Buffer.from(await (await fetch(record.output_urls[0])).arrayBuffer());
    // Default 720x1280 → 704x1280; 1 s × 8 fps = 8 frames → 9.
    expect(readMp4Info(file)).toMatchObject({ width: 704, height: 1280, frames: 9, fps: 8 });
  });

  it('an omitted fps is 24 on an unpinned model, on both routes', async () => {
    const client = new OpenAI({ baseURL: unpinned.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const created = await client.videos.create({ model: UNPINNED, prompt: 'a kite', seconds: '1', size: '704x480' } as never);
    expect((await waitForVideo(client, created.id)).status).toBe('completed');
    // 1 s × 24 fps = 24 frames → nearest 4n+1 is 25.
    expect(readMp4Info(await download(client, created.id))).toMatchObject({ frames: 25, fps: 24 });

    const media = new MediaClient(unpinned.baseUrl, workspace.apiKey);
    const submitted = await media.post('/videos/generations', { model: UNPINNED, prompt: 'a kite', resolution: '704x480', duration: 1 });
    const record = await media.waitForRecord(submitted.body.id);
    expect(record.status).toBe('succeeded');
    expect(readMp4Info(Buffer.from(await (await fetch(record.output_urls[0])).arrayBuffer()))).toMatchObject({ frames: 25, fps: 24 });
  });

  it('content before completion is 409 video_not_ready; cancel: 204 queued, 409 running, 204 when finished', async () => {
    const client = new MediaClient(unpinned.baseUrl, workspace.apiKey);
    const form = (prompt: string) => {
      const data = new FormData();
      for (const [name, value] of Object.entries({ model: UNPINNED, prompt, seconds: '1', size: '704x480', fps: '4' })) data.append(name, value);
      return fetch(`${unpinned.baseUrl}/videos`, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}` }, body: data }).then((response) => response.json());
    };
    const running = await form('long take [cpu-engine:delay=2000]');
    await client.waitForRecord(running.id, (record) => record.status === 'running');
    const queued = await form('next in line');
    const notReady = await client.get(`/videos/${queued.id}/content`);
    expect(notReady.status).toBe(409);
    expect(notReady.body.error.code).toBe('video_not_ready');
    expect(notReady.body.error.message).toContain('queued');
    const runningContent = await client.get(`/videos/${running.id}/content`);
    expect(runningContent.body.error.message).toContain('in_progress');
    expect((await client.get(`/videos/${running.id}`)).body).toMatchObject({ status: 'in_progress' });

    const cancelQueued = await fetch(`${unpinned.baseUrl}/videos/${queued.id}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}` } });
    expect(cancelQueued.status).toBe(204);
    expect((await client.get(`/videos/${queued.id}`)).body.status).toBe('canceled');
    const cancelRunning = await client.post(`/videos/${running.id}/cancel`, {});
    expect(cancelRunning.status).toBe(409);
    expect(cancelRunning.body.error.code).toBe('video_not_cancellable');
    await client.waitForRecord(running.id);
    const cancelDone = await fetch(`${unpinned.baseUrl}/videos/${running.id}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}` } });
    expect(cancelDone.status).toBe(204);
    expect((await client.get(`/videos/${running.id}`)).body.status).toBe('completed');
    const content = await client.get(`/videos/${running.id}/content`);
    expect(content.status).toBe(302);
    expect(content.headers.get('location')).toContain('/files/outputs/');
  });

  it('a failed video carries error {code, message}', async () => {
    const client = new MediaClient(unpinned.baseUrl, workspace.apiKey);
    const submitted = await client.post('/videos/generations', { model: UNPINNED, prompt: 'too much [cpu-engine:vram_exceeded]', duration: 1, fps: 4 });
    await client.waitForRecord(submitted.body.id);
    const video = (await client.get(`/videos/${submitted.body.id}`)).body;
    expect(video).toMatchObject({ object: 'video', status: 'failed', error: { code: 'vram_exceeded' } });
  });

  it('lists the deployment\'s videos newest first, with has_more past the limit; a bad limit is 400 naming it', async () => {
    const client = new MediaClient(unpinned.baseUrl, workspace.apiKey);
    const all = (await client.get('/videos?limit=100')).body;
    expect(all.data.length).toBeGreaterThanOrEqual(2);
    expect(all).toMatchObject({ object: 'list', has_more: false });
    expect(all.data.every((video: any) => video.object === 'video')).toBe(true);
    expect(all.data.map((video: any) => video.created_at)).toEqual([...all.data.map((video: any) => video.created_at)].sort((a, b) => b - a));
    const first = (await client.get('/videos?limit=1')).body;
    expect(first).toMatchObject({ object: 'list', has_more: true, data: [{ id: all.data[0].id }] });
    for (const limit of ['0', '101', 'abc']) {
      const response = await client.get(`/videos?limit=${limit}`);
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ code: 'invalid_request', param: 'limit' });
    }
  });
});
