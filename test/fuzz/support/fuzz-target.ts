import { Writable } from 'node:stream';
import pino from 'pino';
import sharp from 'sharp';
import { OPERATOR_TOKEN } from '../../capacity/support/graphql-client';
import { SHARED_MODEL, startSharingFixture, type SharingFixture } from '../../sharing/support/sharing-fixture';
import type { TestWorkspace } from '../../support/test-server';

/** Takes image generations and edits (image input), so one deployment serves both image routes. */
export const IMAGE_MODEL = 'black-forest-labs/FLUX.1-Kontext-dev';
/** Text- and image-to-video without a pinned spec: any duration × fps within the limits is accepted. */
export const VIDEO_MODEL = 'Lightricks/LTX-Video';
/** A webhook_url the server accepts (loopback, allowed in tests); nothing listens there. */
export const HOOK = 'http://127.0.0.1:9/hook';
/**
 * Smaller than the defaults (4 MiB JSON, 50 MiB multipart) so bodies at and past the limit
 * cost little to send; the limit checks are the same code whatever the number.
 */
export const BODY_LIMITS = { json: 64 * 1024, media: 256 * 1024 };

export interface Endpoint {
  id: string;
  slug: string;
  baseUrl: string;
}

export interface FuzzTarget {
  fixture: SharingFixture;
  url: string;
  /** The workspace whose endpoints are fuzzed; its key has limits no fuzz run reaches. */
  owner: TestWorkspace;
  /** Another workspace, calling the shared endpoint with credit to spend. */
  guest: { id: string; apiKey: string };
  operatorToken: string;
  text: Endpoint;
  image: Endpoint;
  video: Endpoint;
  /** The owner's deployment of the chat model with idle capacity shared. */
  shared: Endpoint;
  models: { chat: string; image: string; video: string };
  /**
   * Things GraphQL mutations may change or delete without harming the endpoints under test:
   * an external deployment (no agent), a second key, a webhook endpoint, a workspace, a static host.
   */
  decoys: { deploymentId: string; apiKeyId: string; webhookEndpointId: string; workspaceId: string; staticHostId: string };
  /** Ids of request records the fuzz created (202s); path-id generators pick from them when they run. */
  requestIds: string[];
  images: { png: Buffer; jpeg: Buffer; webp: Buffer };
  /** Everything the server logged at error level or above (a non-AppError reaching the edge is logged so). */
  errorLogs: Array<Record<string, unknown>>;
  stop(): Promise<void>;
}

/**
 * One server for the whole fuzz file: a text deployment, an image and a video deployment on
 * local CPU agents, a shared deployment (the fixture of test/sharing), and decoys.
 */
export async function startFuzzTarget(): Promise<FuzzTarget> {
  const errorLogs: Array<Record<string, unknown>> = [];
  const capture = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) errorLogs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const fixture = await startSharingFixture({
    logger: pino({ level: 'error' }, capture),
    gateway: { maxBodyBytes: BODY_LIMITS.json },
    controlPlane: {
      // Owners' valid chat cases and guests' share a replica: more slots than the fixture's 4.
      localMaxConcurrency: 16,
      // No per-request engine switches (a `cpu_engine` field must not be able to kill an agent here).
      localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'false' },
      webhooks: { allowInsecureLoopback: true },
      requests: { maxMediaBodyBytes: BODY_LIMITS.media },
    },
  });
  const { test, graphql } = fixture;
  try {
    const controlPlane = test.server.controlPlane;
    const chat = controlPlane.catalog.defaultChatModel().id;
    const limits = { rpmLimit: 10_000_000, tpdLimit: 1_000_000_000_000 };
    const owner = await test.createWorkspace(limits);
    const guestWorkspace = await fixture.workspace('guest', '100000');
    await controlPlane.apiKeys.setLimits(guestWorkspace.id, (await controlPlane.apiKeys.list(guestWorkspace.id))[0].id, limits);

    const text = await test.createDeployment(owner);
    const image = await test.createDeployment(owner, { modelId: IMAGE_MODEL });
    const video = await test.createDeployment(owner, { modelId: VIDEO_MODEL });
    const shared = await fixture.sharedDeployment(owner.apiKey);
    const sharedSlug = shared.baseUrl.replace(/^.*\/d\/([^/]+)\/v1$/, '$1');

    const decoyDeployment = await test.createDeployment(owner, { modelId: chat, provider: 'external' });
    const decoyKey = await controlPlane.apiKeys.create(owner.workspaceId, 'decoy', {});
    const decoyWorkspace = await controlPlane.workspaces.create('decoy');
    const hook = await graphql('mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { id } }', { url: HOOK }, owner.apiKey);
    const host = await graphql('mutation { registerStaticHost(input: {name: "decoy", gpuName: "RTX 4090", gpuMemoryGb: 24, region: "us-east", pricePerHour: 0.5}) { host { id } } }');
    if (hook.errors || host.errors) throw new Error(`decoys: ${JSON.stringify([hook.errors, host.errors])}`);

    await Promise.all([text, image, video].map((endpoint) => test.waitForReplicas(endpoint.id, 1, 60_000)));
    const solid = (color: string) => sharp({ create: { width: 8, height: 8, channels: 3, background: color } });
    const images = { png: await solid('#2040c0').png().toBuffer(), jpeg: await solid('#c04020').jpeg().toBuffer(), webp: await solid('#20c040').webp().toBuffer() };
    return {
      fixture, url: test.url, owner, guest: guestWorkspace, operatorToken: OPERATOR_TOKEN,
      text, image, video, shared: { id: shared.id, slug: sharedSlug, baseUrl: shared.baseUrl },
      models: { chat, image: IMAGE_MODEL, video: VIDEO_MODEL },
      decoys: {
        deploymentId: decoyDeployment.id, apiKeyId: decoyKey.apiKey.id, webhookEndpointId: hook.data.createWebhookEndpoint.id,
        workspaceId: decoyWorkspace.id, staticHostId: host.data.registerStaticHost.host.id,
      },
      requestIds: [], images, errorLogs,
      stop: () => test.stop(),
    };
  } catch (error) {
    await test.stop();
    throw error;
  }
}

/** The shared model's id on the shared endpoint. */
export const sharedModelId = (): string => `shared/${SHARED_MODEL}`;
