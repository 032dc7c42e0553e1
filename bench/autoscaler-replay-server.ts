/**
 * The server of `npm run bench:autoscaler-replay`, in its own process: `startServer` with the
 * configuration of its environment (CAPACITY_INTERVAL_MS, AUTOSCALE_*, DATABASE_URL or an
 * embedded PostgreSQL in DATA_DIR, LOCAL_AGENT_MAX_CONCURRENCY …) plus what only code can set:
 * the environment of its local CPU-engine agents (`localAgentEnv`: the acted-out start-up and
 * the service time), a catalog model whose stated `service` figures are that service time, and
 * a workspace allowed local replicas with a key. It prints one JSON line, `{url, apiKey, modelId}`,
 * and stops (its agents with it) on SIGINT or SIGTERM, or when the bench that started it is gone.
 * Configuration: BENCH_REPLAY_SERVER, a JSON `{localAgentEnv, model}` (run-autoscaler-replay.ts).
 */
import { parseJsonText } from '../common/json-nesting';
import { watchParentPipe } from '../common/parent-pipe';
import { UNLIMITED } from '../control-plane/budgets/budget-kinds';
import { startServer, type Server } from '../gateway/server';

interface ReplayServerSettings {
  readonly localAgentEnv: Record<string, string>;
  /** Catalog fields over a copy of the default chat model's (id, service figures, target concurrency). */
  readonly model: Record<string, unknown>;
}

async function main(): Promise<void> {
  const settings = parseJsonText(process.env.BENCH_REPLAY_SERVER ?? '{}') as ReplayServerSettings;
  let server: Server | null = null;
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await server?.stop().catch(() => {});
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  watchParentPipe(process.stdin, () => void stop());
  server = await startServer({ env: process.env, controlPlane: { localAgentEnv: settings.localAgentEnv } });
  const { controlPlane, gateway } = server;
  const model = await controlPlane.catalogAdmin.register({ ...controlPlane.catalog.defaultChatModel(), official: false, ...settings.model });
  const workspace = await controlPlane.workspaces.create('autoscaler replay');
  await controlPlane.workspaceBudgets.set(workspace.id, 'local_replicas', 'workspace', UNLIMITED);
  const { plaintext } = await controlPlane.apiKeys.create(workspace.id, 'replay', {});
  process.stdout.write(`${JSON.stringify({ url: gateway.url, apiKey: plaintext, modelId: model.id })}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
