/**
 * The server of `bench:batch-holes`, in its own process so that what is measured on its event
 * loop is the server's work alone (the bench's clients build and send 100 MB bodies). Started by
 * run-batch-holes.ts with fork(); answers its questions over IPC (BatchHolesRequest).
 */
import fs from 'node:fs';
import { monitorEventLoopDelay, type ELDHistogram } from 'node:perf_hooks';
import pino from 'pino';
import { startServer } from '../gateway/server';

export type BatchHolesRequest =
  | { id: number; kind: 'loop-start' }
  | { id: number; kind: 'loop-stop' }
  | { id: number; kind: 'query'; sql: string; params: unknown[] }
  | { id: number; kind: 'put-object'; key: string; path: string }
  | { id: number; kind: 'batch'; workspaceId: string; batchId: string }
  | { id: number; kind: 'cancel'; workspaceId: string; batchId: string }
  | { id: number; kind: 'stats' }
  | { id: number; kind: 'stop' };

export interface BatchHolesStart {
  databaseUrl: string;
  dataDir: string;
  maxLines: number;
  filesMaxBytes: number;
}

async function main(): Promise<void> {
  const start = JSON.parse(process.argv[2]) as BatchHolesStart;
  const server = await startServer({
    env: {}, logger: pino({ level: 'silent' }),
    controlPlane: {
      databaseUrl: start.databaseUrl, dataDir: start.dataDir, grpcHost: '127.0.0.1', grpcPort: 0, localAgents: false,
      batches: { maxLines: start.maxLines, filesMaxBytes: start.filesMaxBytes },
    },
    gateway: { host: '127.0.0.1', port: 0, logLevel: 'silent' },
  });
  const { controlPlane, gateway } = server;
  const workspace = await controlPlane.workspaces.create('bench');
  const { plaintext } = await controlPlane.apiKeys.create(workspace.id, 'bench key', {});
  const { deployment } = await controlPlane.deployments.create(workspace.id, {
    modelId: controlPlane.catalog.defaultChatModel().id, priceCapPerHour: 2, minReplicas: 1, maxReplicas: 1, autoscale: false,
  });
  let delay: ELDHistogram | null = null;
  const answer = async (request: BatchHolesRequest): Promise<unknown> => {
    switch (request.kind) {
      case 'loop-start':
        delay = monitorEventLoopDelay({ resolution: 1 });
        delay.enable();
        return null;
      case 'loop-stop': {
        delay!.disable();
        return { p99Ms: delay!.percentile(99) / 1e6, maxMs: delay!.max / 1e6 };
      }
      case 'query':
        return await controlPlane.dataSource.query(request.sql, request.params);
      case 'put-object':
        await controlPlane.managedStore.put(request.key, await fs.promises.readFile(request.path), 'application/jsonl');
        return null;
      case 'batch':
        return await controlPlane.batches.get(request.workspaceId, request.batchId);
      case 'cancel':
        return await controlPlane.batches.cancel(request.workspaceId, request.batchId);
      case 'stats':
        return {
          slices: controlPlane.batchValidator.slices, rss: process.memoryUsage().rss,
          downloads: { active: gateway.downloads.active, heldBytes: gateway.downloads.heldBytes(), maxHeldBytes: gateway.downloads.maxHeldBytes },
        };
      case 'stop':
        await server.stop();
        setImmediate(() => process.exit(0));
        return null;
    }
  };
  process.on('message', (request: BatchHolesRequest) => {
    answer(request).then((result) => process.send!({ id: request.id, result }), (error) => process.send!({ id: request.id, error: String(error) }));
  });
  process.send!({ id: 0, result: { url: gateway.url, workspaceId: workspace.id, apiKey: plaintext, deploymentId: deployment.id, baseUrl: gateway.baseUrl(deployment.slug).replace(gateway.publicUrl, gateway.url) } });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
