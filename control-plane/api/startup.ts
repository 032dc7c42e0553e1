/**
 * Starting the control plane under a gateway (docs/layers.md#the-door): its configuration and
 * database, `startControlPlane`, and `gatewayPorts`, which hands the gateway the ports it uses
 * (the same service objects, typed narrower) instead of the whole `ControlPlane`. Also what the
 * gateway's own process needs of the platform: the first run, engines, project root, secrets
 * hashing, metrics and readiness probes.
 */
import type { ControlPlane } from '../main';
import type { AdminPort } from './admin';
import type { InferencePort } from './inference';
import type { RecordsPort } from './records';
import { controlPlaneProbes, type ReadinessProbe } from '../telemetry/readiness-probes';

export { startControlPlane } from '../main';
/**
 * The whole control plane. The gateway names it only to start and stop it (gateway/server.ts)
 * and to build its ports (`gatewayPorts`); tests and benches may reach it through the
 * TestServer's `controlPlane`, a test-only handle (test/support/test-server.ts).
 */
export type { ControlPlane } from '../main';
export { controlPlaneSettingRows, loadFullControlPlaneConfig, settingRows } from '../full-config';
export type { ControlPlaneConfig, ControlPlaneOverrides, SettingRow, SettingsDeclaration } from '../full-config';
export { DEFAULT_AGENT_BINARY_DIR } from '../config/control-plane-config';
export { boolField, ConfigError, intField, loadEnv } from '../config/env-fields';
export { withLimits } from '../budgets/budget-config';
export { openDatabase } from '../data-source';
export { EmbeddedDatabase } from '../database/embedded-database';
export { DataDirInUseError, DataDirLock } from '../database/data-dir-lock';
export { PROJECT_ROOT } from '../project-root';
export type { ReadinessProbe } from '../telemetry/readiness-probes';
export { NO_DEPLOYMENT } from '../telemetry/metrics';
export type { Metrics } from '../telemetry/metrics';
export { ensureFirstRun } from '../workspaces/first-run';
export type { FirstRunResult } from '../workspaces/first-run';
export { DeploymentEngines, STAND_IN_ENGINE_KIND } from '../replicas/deployment-engines';
export { startTracing } from '../telemetry/start-tracing';
export { hashSecret, sameHash } from '../secrets';

/**
 * What the gateway's own process holds of the platform beside the ports: the HTTP server's
 * plumbing (readiness, metrics, agent downloads, local file links, the public URL) and stopping.
 */
export type HostPort = Pick<ControlPlane, 'config' | 'metrics' | 'managedStore' | 'publicUrl' | 'budget' | 'tracing'> & {
  /** What `/readyz` checks (the database, the gRPC port, rate limits): built here, so the gateway never holds the database. */
  readonly readinessProbes: readonly ReadinessProbe[];
};

/** The ports the gateway is given: each is the started control plane's own objects, typed narrower (no wrappers). */
export interface GatewayPorts {
  readonly inference: InferencePort;
  readonly records: RecordsPort;
  readonly admin: AdminPort;
  readonly host: HostPort;
}

/** The ports of a started control plane; built once at start, never per request. */
export function gatewayPorts(controlPlane: ControlPlane): GatewayPorts {
  const readinessProbes = controlPlaneProbes({
    dataSource: controlPlane.dataSource, grpcHost: controlPlane.config.grpcHost, agentServer: controlPlane.agentServer, rateLimiter: controlPlane.rateLimiter,
  });
  return { inference: controlPlane, records: controlPlane, admin: controlPlane, host: { ...hostOf(controlPlane), readinessProbes } };
}

function hostOf(controlPlane: ControlPlane): Pick<ControlPlane, 'config' | 'metrics' | 'managedStore' | 'publicUrl' | 'budget' | 'tracing'> {
  return {
    config: controlPlane.config, metrics: controlPlane.metrics, managedStore: controlPlane.managedStore, publicUrl: controlPlane.publicUrl, budget: controlPlane.budget,
    tracing: controlPlane.tracing,
  };
}
