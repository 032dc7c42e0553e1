/**
 * Replicas as pods on the GPU nodes of a Kubernetes cluster (docs/kubernetes.md). Offers come
 * from the nodes' free GPUs by class, at the operator's prices; a replica is one pod (its engine
 * and our agent, which dials back like any agent) owned by its deployment's Secret; the pods'
 * states reach the replicas through a watch: waiting for GPU capacity (the scheduler's words),
 * failed (an image that cannot be pulled, a crash loop: the container's message), gone.
 * Pods outlive the control plane: on start-up `reconcile` matches them to replicas by label.
 */
import { ApiException, CoreV1Api, KubeConfig, makeInformer, type Informer, type V1Node, type V1Pod, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { agentBinarySha256, agentDownloadPath } from '../../../common/agent-binary';
import type { Catalog } from '../../catalog/catalog';
import type { Deployment } from '../../deployments/deployment.entity';
import type { CapacityProvider } from '../../replicas/capacity-provider';
import type { GpuOffer } from '../../replicas/gpu-offer';
import type { Replica } from '../../replicas/replica.entity';
import { engineContainerFor } from './engine-container';
import { gpuOffers, parseOfferId } from './gpu-offers';
import type { KubernetesConfig } from './kubernetes-config';
import { podCondition } from './pod-condition';
import { deploymentSecret, LABELS, MANAGED_BY, modelLabelValue, podName, replicaPod, secretName } from './replica-pod';

/** What the provider tells the replicas about their pods (ReplicaManager implements it). */
export interface PodEvents {
  /** Still coming: the reason replaces the replica's status reason while it is Creating. */
  waiting(replicaId: string, reason: string): void;
  /** Will not come: the replica ends with this reason (placement tries again after a back-off). */
  failed(replicaId: string, reason: string): void;
  /** Its pod went away without us deleting it (a node drained, someone's kubectl delete): replaced. */
  gone(replicaId: string, reason: string): void;
}

export interface KubernetesProviderOptions {
  readonly config: KubernetesConfig;
  readonly kubeConfig: KubeConfig;
  readonly catalog: Pick<Catalog, 'get'>;
  /** The folder holding the agent binary the gateway serves (AGENT_BINARY_DIR). */
  readonly agentBinaryDir: string;
  readonly version: string;
  readonly events: PodEvents;
  /** The clock in milliseconds of the offers cache and the failure back-off. @default Date.now */
  readonly now?: () => number;
}

const OFFERS_TTL_MS = 2_000;
const MAX_BACKOFF_MS = 300_000;
const LABEL_SELECTOR = `${LABELS.managedBy}=${MANAGED_BY}`;

export function loadKubeConfig(source: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (source === 'in-cluster') kubeConfig.loadFromCluster();
  else kubeConfig.loadFromFile(source);
  return kubeConfig;
}

export class KubernetesProvider implements CapacityProvider {
  readonly kind = 'kubernetes';
  private readonly core: CoreV1Api;
  private readonly config: KubernetesConfig;
  private informer: (Informer<V1Pod>) | null = null;
  private restartTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private offersCache: { at: number; offers: Promise<GpuOffer[]> } | null = null;
  /** Replicas we are deleting: their pods' going away is expected. */
  private readonly terminating = new Set<string>();
  /** What each watched replica last reported, so a status is told once. */
  private readonly reported = new Map<string, string>();
  private readonly goneWaiters = new Map<string, Array<() => void>>();
  /** Per deployment, the chain its Secret's updates run on (one read-modify-replace at a time). */
  private readonly secretChains = new Map<string, Promise<unknown>>();
  /** Per deployment, the last pod failure: the next launch waits for the back-off. */
  private readonly failures = new Map<string, { at: number; backoffMs: number; reason: string }>();
  /**
   * With a host-path model cache: per model (its pod label), the nodes a pod of it ran on, whose
   * cache kept its weights. Learnt from the watch (pods found at start-up included); preferred by
   * the model's next pods.
   */
  private readonly modelNodes = new Map<string, Set<string>>();

  private readonly now: () => number;

  constructor(private readonly options: KubernetesProviderOptions, private readonly logger: Logger) {
    this.now = options.now ?? Date.now;
    this.config = options.config;
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
  }

  /** Starts watching the provider's pods (their states become the replicas'). */
  async start(): Promise<void> {
    const { namespace } = this.config;
    const informer = makeInformer<V1Pod>(this.options.kubeConfig, `/api/v1/namespaces/${namespace}/pods`,
      () => this.core.listNamespacedPod({ namespace, labelSelector: LABEL_SELECTOR }), LABEL_SELECTOR);
    informer.on('add', (pod) => this.observe(pod));
    informer.on('update', (pod) => this.observe(pod));
    informer.on('delete', (pod) => this.deleted(pod));
    informer.on('error', (error) => {
      if (this.stopped) return;
      this.logger.warn({ err: error }, 'the pod watch broke; restarting it');
      clearTimeout(this.restartTimer);
      this.restartTimer = setTimeout(() => void informer.start().catch((cause) => this.logger.warn({ err: cause }, 'could not restart the pod watch')), this.config.watchRestartSeconds * 1000);
      this.restartTimer.unref();
    });
    this.informer = informer;
    try {
      await informer.start();
    } catch (error) {
      // The cluster may be down while we start: the server comes up and keeps trying.
      this.logger.error({ err: error }, 'could not start the pod watch; retrying');
      this.restartTimer = setTimeout(() => void this.informer?.start().catch(() => undefined), this.config.watchRestartSeconds * 1000);
      this.restartTimer.unref();
    }
  }

  async offers(): Promise<GpuOffer[]> {
    const now = this.now();
    if (!this.offersCache || now - this.offersCache.at > OFFERS_TTL_MS) {
      const offers = (async () => {
        const [nodes, pods] = await Promise.all([
          this.core.listNode({ labelSelector: this.config.gpuProductLabel }),
          this.core.listPodForAllNamespaces({ fieldSelector: 'status.phase!=Succeeded,status.phase!=Failed' }),
        ]);
        return gpuOffers(this.config, nodes.items as V1Node[], pods.items as V1Pod[]);
      })();
      this.offersCache = { at: now, offers };
      offers.catch(() => { if (this.offersCache?.offers === offers) this.offersCache = null; });
    }
    return await this.offersCache.offers;
  }

  /** A deployment whose last pod failed waits out its back-off before the next one. */
  holdReason(deploymentId: string): string | null {
    const failure = this.failures.get(deploymentId);
    if (!failure) return null;
    const leftMs = failure.at + failure.backoffMs - this.now();
    if (leftMs <= 0) return null;
    return `waiting for a ${Math.round(failure.backoffMs / 1000)} s back-off before the next pod, because the last one failed: ${failure.reason}`;
  }

  async launch(offer: GpuOffer, deployment: Deployment, replica: Replica, joinToken: string): Promise<void> {
    const placement = parseOfferId(this.config, offer.id);
    if (!placement) throw new Error(`offer ${offer.id} is not one of this cluster's GPU classes`);
    const model = this.options.catalog.get(deployment.modelId);
    const engine = engineContainerFor(model, placement.gpus, replica.priorityScheduling, this.config.engineImages, deployment);
    if (!engine) throw new Error(`no container image for engine '${model.engine}' of ${model.id}: give the catalog entry a container, or engineImages.${model.engine}`);
    const sha256 = await agentBinarySha256(this.options.agentBinaryDir, this.config.agentArch);
    if (!sha256) throw new Error(`the agent binary for linux-${this.config.agentArch} is not built on this server (npm run build:agent)`);
    const secret = await this.updateSecret(deployment.id, (tokens) => ({ ...tokens, [replica.id]: joinToken })).catch((error) => {
      throw apiFailure(error, 'its join token');
    });
    const pod = replicaPod(this.config, {
      deploymentId: deployment.id, replicaId: replica.id, modelId: model.id, cachedNodes: [...this.modelNodes.get(modelLabelValue(model.id)) ?? []],
      secret: { name: secret!.metadata!.name!, uid: secret!.metadata!.uid! }, engine, gpus: placement.gpus,
      gpuClass: placement.gpuClass,
      agent: {
        url: `${this.config.controlPlaneHttpUrl.replace(/\/+$/, '')}${agentDownloadPath(this.options.version, this.config.agentArch)}`, sha256,
        maxConcurrency: model.targetConcurrency, priorityScheduling: replica.priorityScheduling, lora: deployment,
      },
    });
    this.offersCache = null;
    await this.core.createNamespacedPod({ namespace: this.config.namespace, body: pod }).catch((error) => {
      throw apiFailure(error, 'its pod');
    });
  }

  /** Deletes the replica's pod (its agent drains within the grace period), then its token. */
  async terminate(replicaId: string): Promise<void> {
    this.terminating.add(replicaId);
    const name = podName(this.config, replicaId);
    const gone = this.waitGone(replicaId, this.config.terminateWaitSeconds * 1000);
    let deploymentId: string | undefined;
    try {
      const pod = await this.core.deleteNamespacedPod({ name, namespace: this.config.namespace, gracePeriodSeconds: this.config.terminationGracePeriodSeconds });
      deploymentId = pod.metadata?.labels?.[LABELS.deploymentId];
      await gone;
    } catch (error) {
      if (!isNotFound(error)) throw error;
    } finally {
      this.offersCache = null;
    }
    deploymentId ??= await this.deploymentOfToken(replicaId);
    if (deploymentId) await this.removeToken(deploymentId, replicaId);
    this.terminating.delete(replicaId);
    this.reported.delete(replicaId);
  }

  /**
   * After a restart: pods of replicas that ended meanwhile are deleted, and the ids of active
   * replicas whose pod is gone are returned (they are replaced). Secrets of deployments with no
   * active replica left go too.
   */
  async reconcile(active: readonly Replica[]): Promise<string[]> {
    const { namespace } = this.config;
    const pods = (await this.core.listNamespacedPod({ namespace, labelSelector: LABEL_SELECTOR })).items;
    const activeIds = new Set(active.map((replica) => replica.id));
    const withPod = new Set<string>();
    for (const pod of pods) {
      const replicaId = pod.metadata?.labels?.[LABELS.replicaId];
      if (!replicaId) continue;
      if (activeIds.has(replicaId) && !pod.metadata?.deletionTimestamp) {
        withPod.add(replicaId);
        continue;
      }
      this.logger.info({ pod: pod.metadata?.name, replicaId }, 'deleting the pod of a replica that ended while no server watched it');
      await this.terminate(replicaId).catch((error) => this.logger.warn({ err: error, replicaId }, 'could not delete an orphan pod'));
    }
    const secrets = (await this.core.listNamespacedSecret({ namespace, labelSelector: LABEL_SELECTOR })).items;
    const liveDeployments = new Set(active.map((replica) => replica.deploymentId));
    for (const secret of secrets) {
      const deploymentId = secret.metadata?.labels?.[LABELS.deploymentId];
      if (deploymentId && !liveDeployments.has(deploymentId)) await this.deleteSecret(deploymentId);
    }
    return active.filter((replica) => !withPod.has(replica.id)).map((replica) => replica.id);
  }

  /** Stops watching; the pods run on (they are the cluster's, and their agents rejoin the next server). */
  async stopAll(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    await this.informer?.stop();
  }

  // ---- the watch ------------------------------------------------------------------------

  private observe(pod: V1Pod): void {
    const replicaId = pod.metadata?.labels?.[LABELS.replicaId];
    if (!replicaId || this.terminating.has(replicaId) || pod.metadata?.deletionTimestamp) return;
    const condition = podCondition(pod);
    if (condition.kind === 'running') this.noteModelNode(pod);
    const key = condition.kind === 'running' ? 'running' : `${condition.kind}:${condition.reason}`;
    if (this.reported.get(replicaId) === key) return;
    this.reported.set(replicaId, key);
    if (condition.kind === 'waiting') this.options.events.waiting(replicaId, condition.reason);
    if (condition.kind === 'failed') {
      this.noteFailure(pod.metadata?.labels?.[LABELS.deploymentId], condition.reason);
      this.logger.warn({ replicaId, pod: pod.metadata?.name, reason: condition.reason }, 'a replica pod failed');
      this.options.events.failed(replicaId, condition.reason);
    }
  }

  /** A pod of a model runs on its node: with a host-path cache, that node now holds (or is fetching) the model's weights. */
  private noteModelNode(pod: V1Pod): void {
    const model = pod.metadata?.labels?.[LABELS.model];
    const node = pod.spec?.nodeName;
    if (!this.config.modelCache?.hostPath || !model || !node) return;
    const nodes = this.modelNodes.get(model) ?? new Set<string>();
    nodes.add(node);
    this.modelNodes.set(model, nodes);
  }

  private deleted(pod: V1Pod): void {
    const replicaId = pod.metadata?.labels?.[LABELS.replicaId];
    if (!replicaId) return;
    this.offersCache = null;
    const waiters = this.goneWaiters.get(replicaId);
    this.goneWaiters.delete(replicaId);
    for (const resolve of waiters ?? []) resolve();
    if (this.terminating.has(replicaId) || this.reported.get(replicaId)?.startsWith('failed:')) return;
    this.reported.delete(replicaId);
    this.options.events.gone(replicaId, `its pod ${pod.metadata?.name} was deleted outside the platform${pod.spec?.nodeName ? ` (node ${pod.spec.nodeName})` : ''}: replaced`);
  }

  private waitGone(replicaId: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      const waiters = this.goneWaiters.get(replicaId) ?? [];
      waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
      this.goneWaiters.set(replicaId, waiters);
    });
  }

  private noteFailure(deploymentId: string | undefined, reason: string): void {
    if (!deploymentId) return;
    const previous = this.failures.get(deploymentId);
    const base = this.config.failureBackoffSeconds * 1000;
    const backoffMs = previous && this.now() - previous.at < MAX_BACKOFF_MS ? Math.min(MAX_BACKOFF_MS, previous.backoffMs * 2) : base;
    this.failures.set(deploymentId, { at: this.now(), backoffMs, reason });
  }

  // ---- the deployment's Secret --------------------------------------------------------------

  /** Read-modify-replace of the deployment's tokens, one at a time per deployment; creates or deletes the Secret as needed. */
  private updateSecret(deploymentId: string, change: (tokens: Record<string, string>) => Record<string, string>): Promise<V1Secret | null> {
    const previous = this.secretChains.get(deploymentId) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(() => this.applySecret(deploymentId, change));
    this.secretChains.set(deploymentId, next);
    void next.finally(() => { if (this.secretChains.get(deploymentId) === next) this.secretChains.delete(deploymentId); }).catch(() => undefined);
    return next;
  }

  private async applySecret(deploymentId: string, change: (tokens: Record<string, string>) => Record<string, string>): Promise<V1Secret | null> {
    const { namespace } = this.config;
    const name = secretName(this.config, deploymentId);
    for (let attempt = 0; ; attempt++) {
      const current = await this.core.readNamespacedSecret({ name, namespace }).catch((error) => {
        if (isNotFound(error)) return null;
        throw error;
      });
      const tokens = change(decodeTokens(current));
      try {
        if (Object.keys(tokens).length === 0) {
          if (current) await this.deleteSecret(deploymentId);
          return null;
        }
        const body = deploymentSecret(this.config, deploymentId, tokens, current?.metadata?.resourceVersion);
        return current
          ? await this.core.replaceNamespacedSecret({ name, namespace, body })
          : await this.core.createNamespacedSecret({ namespace, body });
      } catch (error) {
        // Someone else changed it between our read and write (another server): read again.
        if (attempt < 5 && error instanceof ApiException && (error.code === 409)) continue;
        throw error;
      }
    }
  }

  private async removeToken(deploymentId: string, replicaId: string): Promise<void> {
    await this.updateSecret(deploymentId, (tokens) => {
      const { [replicaId]: _removed, ...rest } = tokens;
      return rest;
    });
  }

  private async deleteSecret(deploymentId: string): Promise<void> {
    await this.core.deleteNamespacedSecret({ name: secretName(this.config, deploymentId), namespace: this.config.namespace, propagationPolicy: 'Background' }).catch((error) => {
      if (!isNotFound(error)) throw error;
    });
  }

  /** The deployment whose Secret holds this replica's token (the pod was already gone). */
  private async deploymentOfToken(replicaId: string): Promise<string | undefined> {
    const secrets = (await this.core.listNamespacedSecret({ namespace: this.config.namespace, labelSelector: LABEL_SELECTOR })).items;
    return secrets.find((secret) => replicaId in decodeTokens(secret))?.metadata?.labels?.[LABELS.deploymentId];
  }
}

function decodeTokens(secret: V1Secret | null): Record<string, string> {
  const tokens: Record<string, string> = {};
  for (const [key, value] of Object.entries(secret?.data ?? {})) tokens[key] = Buffer.from(value, 'base64').toString('utf8');
  for (const [key, value] of Object.entries(secret?.stringData ?? {})) tokens[key] = value;
  return tokens;
}

/**
 * What a refused API call says on the replica: the Status message only. The client's own
 * message carries the response's headers and body, which are not for users to read.
 */
export function apiFailure(error: unknown, what: string): Error {
  if (!(error instanceof ApiException)) return error instanceof Error ? error : new Error(String(error));
  let message = '';
  try {
    message = String((typeof error.body === 'string' ? JSON.parse(error.body) : error.body)?.message ?? '');
  } catch {
    // Not a Status object: the code alone.
  }
  return new Error(`the Kubernetes API refused ${what} (HTTP ${error.code}${message ? `: ${message.slice(0, 300)}` : ''})`);
}

function isNotFound(error: unknown): boolean {
  return error instanceof ApiException && error.code === 404;
}
