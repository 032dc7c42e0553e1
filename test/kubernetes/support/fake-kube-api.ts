/**
 * A fake Kubernetes API server for tests (no kube-apiserver can run on these machines): plain
 * HTTP on 127.0.0.1 with bearer-token auth, speaking the part of core/v1 the provider uses, in
 * the real server's terms — nodes; pods (create, get, list, delete gracefully, logs); watches
 * from a resource version, 410 Expired once it is too old; Secrets with optimistic concurrency
 * and owner garbage collection; events; Status objects for every failure. It is our counterpart
 * at a boundary we do not own, so tests reach it only through the official client and a real
 * kubeconfig. TestKubelet (test-kubelet.ts) plays the scheduler and the kubelet beside it.
 *
 * The programmatic side (addNode, pods, updatePodStatus, on('pod') …) is for tests and the
 * kubelet; storage, validation, selectors and RBAC live in the files beside this one.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig, type CoreV1Event, type V1Node, type V1Pod, type V1PodStatus, type V1Secret, type V1Taint } from '@kubernetes/client-node';
import { allows, forbiddenMessage, type Access, type RbacGrants, type Verb } from './fake-rbac';
import { isResource, KubeApiError, kubeTime, RESOURCES, type KubeObject, type Resource } from './fake-kube-resources';
import { FakeKubeStore, type DeleteOptions, type PropagationPolicy, type StoreChange, type WatchEventType } from './fake-kube-store';

export type { Access, RbacGrants } from './fake-rbac';
export { notGranted } from './fake-rbac';
export type { WatchEventType } from './fake-kube-store';

export interface FakeKubeApiOptions {
  /** The bearer token requests must carry (401 otherwise). */
  readonly token: string;
  /** Watch history kept for resumes (default 1000 changes); older resource versions answer 410. */
  readonly historyLimit?: number;
  /** When given, only these namespaces exist (creating elsewhere: 404 namespaces "x" not found). */
  readonly namespaces?: readonly string[];
  /** Garbage collector latency (default 20 ms). */
  readonly gcDelayMs?: number;
  /** How often a watch that asked for bookmarks gets one (default 1000 ms). */
  readonly bookmarkIntervalMs?: number;
  /** When given, requests are authorized against these rules (403 Forbidden as the real authorizer words it). */
  readonly rbac?: RbacGrants;
}

export interface NodeInput {
  readonly name: string;
  readonly labels?: Record<string, string>;
  /** e.g. `{ 'nvidia.com/gpu': '8', cpu: '64', memory: '512Gi' }` (also the node's capacity). */
  readonly allocatable: Record<string, string>;
  readonly taints?: V1Taint[];
  /** Cordoned (`spec.unschedulable`). */
  readonly unschedulable?: boolean;
}

/** One request the server answered. */
export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  /** What RBAC would need for it (absent for discovery and unknown paths). */
  readonly access?: Access;
  status: number;
}

export interface EventInput {
  readonly namespace: string;
  readonly involvedObject: { readonly kind: string; readonly name: string; readonly uid?: string; readonly fieldPath?: string };
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
  /** `default-scheduler` or `kubelet`. */
  readonly component: string;
  readonly host?: string;
}

/** What the API server asks of the kubelet: the log lines of a container. */
export interface PodLogSource {
  /** Undefined when the container has not run (with `previous`: no earlier run ended). */
  logs(namespace: string, pod: string, container: string, previous: boolean): Array<{ readonly time: string; readonly line: string }> | undefined;
}

interface ObjectTypes {
  pod: V1Pod;
  node: V1Node;
  secret: V1Secret;
  event: CoreV1Event;
}

const LISTENED: Record<keyof ObjectTypes, Resource> = { pod: 'pods', node: 'nodes', secret: 'secrets', event: 'events' };

/**
 * Objects handed to tests are in their wire form (timestamps are RFC 3339 strings, as in objects
 * the client's Watch delivers), typed as the client's models for convenience.
 */
function asModel<T>(object: KubeObject): T {
  return object as unknown as T;
}

export class FakeKubeApi {
  private server: http.Server | null = null;
  private port = 0;
  private readonly store: FakeKubeStore;
  private readonly openWatches = new Set<http.ServerResponse>();
  private readonly records = new WeakMap<http.ServerResponse, RequestRecord>();
  private readonly createdObjects: KubeObject[] = [];
  private logSource: PodLogSource | null = null;
  private eventSequence = 0;
  /** Events by what makes a repeat (object, reason, message, type, source): a repeat raises the count. */
  private readonly eventNames = new Map<string, string>();
  private directory: string | null = null;
  /** Every request, in order: method, path, query, the access it needed, the status answered. */
  readonly requests: RequestRecord[] = [];

  constructor(private readonly options: FakeKubeApiOptions) {
    this.store = new FakeKubeStore({ historyLimit: options.historyLimit, namespaces: options.namespaces, gcDelayMs: options.gcDelayMs });
  }

  async start(): Promise<void> {
    this.directory = fs.mkdtempSync(path.join(os.tmpdir(), 'fake-kube-api-'));
    const server = http.createServer((request, response) => {
      void this.handle(request, response).catch((error: unknown) => {
        const failure = error instanceof KubeApiError ? error : new KubeApiError(500, 'InternalError', `Internal error occurred: ${(error as Error).message}`);
        if (!response.headersSent) this.sendJson(response, failure.code, failure.toStatus());
        else response.end();
      });
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const response of this.openWatches) response.end();
    this.openWatches.clear();
    this.store.close();
    const server = this.server;
    this.server = null;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    if (this.directory) fs.rmSync(this.directory, { recursive: true, force: true });
    this.directory = null;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get resourceVersion(): string {
    return this.store.resourceVersion;
  }

  /**
   * Writes a kubeconfig for this server (JSON, which YAML readers take) and returns its path.
   * `insecure-skip-tls-verify` is required: the official client refuses an `http://` server
   * otherwise ("HTTP protocol is not allowed when skipTLSVerify is not set or false").
   */
  writeKubeconfig(file: string, namespace: string): string {
    fs.writeFileSync(file, `${JSON.stringify({
      apiVersion: 'v1', kind: 'Config', preferences: {}, 'current-context': 'fake',
      clusters: [{ name: 'fake', cluster: { server: this.url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'fake-user', user: { token: this.options.token } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'fake-user', namespace } }],
    }, null, 2)}\n`, { mode: 0o600 });
    return file;
  }

  /** A KubeConfig loaded from a kubeconfig file written for this server (as a process would load it). */
  kubeConfig(namespace: string): KubeConfig {
    if (!this.directory) throw new Error('the fake API server is not started');
    const config = new KubeConfig();
    config.loadFromFile(this.writeKubeconfig(path.join(this.directory, `kubeconfig-${namespace}.json`), namespace));
    return config;
  }

  /** The distinct accesses requests needed (verb, resource, scope): hold the RBAC rules against them with `notGranted`. */
  access(): Access[] {
    const seen = new Map<string, Access>();
    for (const record of this.requests) {
      if (!record.access || record.status === 401) continue;
      const { verb, resource, namespace } = record.access;
      seen.set(`${verb} ${resource} ${namespace ?? '*'}`, { verb, resource, namespace });
    }
    return [...seen.values()];
  }

  // ---- the programmatic side (tests, the scheduler, the kubelet) ----------------------------

  /** Tells `listener` of every change of that kind, in order (objects are copies); returns the unsubscribe. */
  on<K extends keyof ObjectTypes>(kind: K, listener: (type: WatchEventType, object: ObjectTypes[K], previous?: ObjectTypes[K]) => void): () => void {
    const resource = LISTENED[kind];
    return this.store.subscribe((change: StoreChange) => {
      if (change.resource !== resource) return;
      listener(change.type, asModel<ObjectTypes[K]>(structuredClone(change.object)), change.previous && asModel<ObjectTypes[K]>(structuredClone(change.previous)));
    });
  }

  /** A kubelet now runs the pods: deleting a bound pod waits for it; its logs come from it. */
  attachKubelet(source: PodLogSource): void {
    this.logSource = source;
    this.store.gracefulPodDeletion = true;
  }

  detachKubelet(source: PodLogSource): void {
    if (this.logSource !== source) return;
    this.logSource = null;
    this.store.gracefulPodDeletion = false;
  }

  addNode(input: NodeInput): V1Node {
    return asModel<V1Node>(this.store.insert('nodes', {
      apiVersion: 'v1', kind: 'Node',
      metadata: { name: input.name, labels: { 'kubernetes.io/hostname': input.name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', ...input.labels } },
      spec: { ...(input.taints?.length ? { taints: structuredClone(input.taints) } : {}), ...(input.unschedulable ? { unschedulable: true } : {}) },
      status: {
        capacity: { ...input.allocatable }, allocatable: { ...input.allocatable },
        conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: kubeTime(), lastTransitionTime: kubeTime() }],
        addresses: [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: input.name }],
        nodeInfo: { kubeletVersion: 'v1.31.0-fake', operatingSystem: 'linux', architecture: 'amd64', containerRuntimeVersion: 'containerd://1.7.0-fake' },
      },
    }));
  }

  updateNode(name: string, change: (node: V1Node) => void): V1Node | undefined {
    const updated = this.store.update('nodes', null, name, (node) => change(asModel<V1Node>(node)));
    return updated && asModel<V1Node>(updated);
  }

  /** The node goes; the pod garbage collector then fails and deletes the pods bound to it, as on a real cluster. */
  removeNode(name: string): void {
    this.store.remove('nodes', null, name);
    for (const pod of this.store.list('pods', null, { fieldSelector: `spec.nodeName=${name}` })) {
      const { namespace } = pod.metadata;
      this.store.update('pods', namespace!, pod.metadata.name, (target) => {
        const status = (target.status ?? {}) as V1PodStatus;
        target.status = {
          ...status, phase: 'Failed',
          conditions: [...(status.conditions ?? []), { type: 'DisruptionTarget', status: 'True', reason: 'DeletionByPodGC', message: 'PodGC: node no longer exists', lastTransitionTime: kubeTime() }],
        };
      });
      this.store.remove('pods', namespace!, pod.metadata.name);
    }
  }

  node(name: string): V1Node | undefined {
    const node = this.store.get('nodes', null, name);
    return node && asModel<V1Node>(node);
  }

  nodes(): V1Node[] {
    return this.store.list('nodes', null).map((node) => asModel<V1Node>(node));
  }

  pods(namespace: string | null = null): V1Pod[] {
    return this.store.list('pods', namespace).map((pod) => asModel<V1Pod>(pod));
  }

  pod(namespace: string, name: string): V1Pod | undefined {
    const pod = this.store.get('pods', namespace, name);
    return pod && asModel<V1Pod>(pod);
  }

  /** Creates a pod as a request would (validated, defaulted), e.g. a leftover of an earlier run; server fields of `pod` are ignored. */
  createPod(namespace: string, pod: V1Pod): V1Pod {
    const body = JSON.parse(JSON.stringify(pod)) as KubeObject;
    const { uid: _uid, resourceVersion: _version, creationTimestamp: _created, deletionTimestamp: _deleted, deletionGracePeriodSeconds: _grace, ...metadata } = body.metadata ?? {};
    const { status: _status, ...rest } = body;
    return asModel<V1Pod>(this.store.create('pods', namespace, { ...rest, metadata: { ...metadata, namespace } }));
  }

  /** Changes a pod in place (the scheduler's binding); undefined when it is gone. */
  updatePod(namespace: string, name: string, change: (pod: V1Pod) => void): V1Pod | undefined {
    const updated = this.store.update('pods', namespace, name, (pod) => change(asModel<V1Pod>(pod)));
    return updated && asModel<V1Pod>(updated);
  }

  /** Replaces a pod's status (the kubelet's status update); undefined when it is gone. */
  updatePodStatus(namespace: string, name: string, status: V1PodStatus): V1Pod | undefined {
    const wire = JSON.parse(JSON.stringify(status)) as V1PodStatus;
    return this.updatePod(namespace, name, (pod) => {
      pod.status = wire;
    });
  }

  /** Deletes a pod as a DELETE request would (graceful while a kubelet runs it). */
  deletePod(namespace: string, name: string, options: DeleteOptions = {}): V1Pod {
    return asModel<V1Pod>(this.store.delete('pods', namespace, name, options).object);
  }

  /** Removes a pod at once (a force delete, or the kubelet done with a graceful one): DELETED. */
  deletePodNow(namespace: string, name: string): V1Pod | undefined {
    const removed = this.store.remove('pods', namespace, name);
    return removed && asModel<V1Pod>(removed);
  }

  secrets(namespace: string | null = null): V1Secret[] {
    return this.store.list('secrets', namespace).map((secret) => asModel<V1Secret>(secret));
  }

  secret(namespace: string, name: string): V1Secret | undefined {
    const secret = this.store.get('secrets', namespace, name);
    return secret && asModel<V1Secret>(secret);
  }

  /** Creates a Secret as a request would (`stringData` becomes base64 `data`). */
  createSecret(namespace: string, secret: V1Secret): V1Secret {
    return asModel<V1Secret>(this.store.create('secrets', namespace, JSON.parse(JSON.stringify(secret)) as unknown));
  }

  events(namespace: string | null = null): CoreV1Event[] {
    return this.store.list('events', namespace).map((event) => asModel<CoreV1Event>(event));
  }

  /**
   * Records an event as the scheduler and kubelet do; a repeat (same object, reason, message,
   * source) raises the existing event's count, as the kubelet's event recorder aggregates.
   */
  recordEvent(input: EventInput): CoreV1Event {
    const pod = input.involvedObject.kind === 'Pod' ? this.store.get('pods', input.namespace, input.involvedObject.name) : undefined;
    const involvedObject = {
      kind: input.involvedObject.kind, namespace: input.namespace, name: input.involvedObject.name, apiVersion: 'v1',
      uid: input.involvedObject.uid ?? pod?.metadata.uid, ...(pod ? { resourceVersion: pod.metadata.resourceVersion } : {}),
      ...(input.involvedObject.fieldPath ? { fieldPath: input.involvedObject.fieldPath } : {}),
    };
    const now = kubeTime();
    const identity = JSON.stringify([input.namespace, involvedObject.uid, involvedObject.fieldPath, input.reason, input.message, input.type, input.component]);
    const repeat = this.eventNames.get(identity);
    const updated = repeat && this.store.update('events', input.namespace, repeat, (event) => {
      event.count = Number(event.count ?? 1) + 1;
      event.lastTimestamp = now;
    });
    if (updated) return asModel<CoreV1Event>(updated);
    const event = asModel<CoreV1Event>(this.store.insert('events', {
      apiVersion: 'v1', kind: 'Event',
      // Named as the recorder names them: the object's name and the time in nanoseconds, in hex.
      metadata: { name: `${input.involvedObject.name}.${(BigInt(Date.now()) * 1_000_000n + BigInt(++this.eventSequence % 1_000_000)).toString(16)}`, namespace: input.namespace },
      involvedObject, reason: input.reason, message: input.message, type: input.type, count: 1, firstTimestamp: now, lastTimestamp: now,
      source: { component: input.component, ...(input.host ? { host: input.host } : {}) },
      reportingComponent: input.component, reportingInstance: input.host ?? '',
    }));
    this.eventNames.set(identity, event.metadata!.name!);
    return event;
  }

  /** Every object created through the HTTP API, as it was sent (for schema checks). */
  created(): KubeObject[] {
    return this.createdObjects.map((object) => structuredClone(object));
  }

  // ---- HTTP -----------------------------------------------------------------------------------

  private async handle(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', this.url);
    const query = url.searchParams;
    const method = request.method ?? 'GET';
    const route = parseRoute(url.pathname);
    const access = route && routeAccess(route, method, query);
    const record: RequestRecord = { method, path: url.pathname, query: Object.fromEntries(query), ...(access ? { access } : {}), status: 0 };
    this.requests.push(record);
    this.records.set(response, record);
    const body = await readBody(request);
    if (request.headers.authorization !== `Bearer ${this.options.token}`) {
      this.sendJson(response, 401, new KubeApiError(401, 'Unauthorized', 'Unauthorized').toStatus());
      return;
    }
    if (!route) throw new KubeApiError(404, 'NotFound', 'the server could not find the requested resource', {});
    if (route.kind === 'discovery') return this.discovery(response, route.path);
    if (!access) throw new KubeApiError(405, 'MethodNotAllowed', `the fake API server does not implement ${method} on ${route.resource}${route.subresource ? `/${route.subresource}` : ''}`, {});
    if (this.options.rbac && !allows(this.options.rbac, access)) {
      throw new KubeApiError(403, 'Forbidden', forbiddenMessage(this.options.rbac, access), { ...(access.name ? { name: access.name } : {}), kind: access.resource.split('/')[0] });
    }
    const { resource, namespace, name } = route;
    const selectors = { labelSelector: query.get('labelSelector'), fieldSelector: query.get('fieldSelector') };
    switch (access.verb) {
      case 'watch':
        return this.watch(response, resource, namespace, query);
      case 'list':
        return this.sendJson(response, 200, {
          apiVersion: 'v1', kind: `${RESOURCES[resource].kind}List`, metadata: { resourceVersion: this.store.resourceVersion },
          items: this.store.list(resource, namespace, selectors),
        });
      case 'get':
        if (route.subresource === 'log') return this.podLog(response, namespace!, name!, query);
        return this.sendJson(response, 200, this.found(resource, namespace, name!));
      case 'create': {
        const object = this.store.create(resource, namespace, parseJson(body));
        this.createdObjects.push(parseJson(body) as KubeObject);
        return this.sendJson(response, 201, object);
      }
      case 'update':
        return this.sendJson(response, 200, this.store.replace(resource, namespace, name!, parseJson(body)));
      case 'delete':
        return this.deleteObject(response, resource, namespace, name!, query, body);
      default:
        throw new KubeApiError(405, 'MethodNotAllowed', `the fake API server does not implement ${access.verb} on ${resource}`, {});
    }
  }

  private found(resource: Resource, namespace: string | null, name: string): KubeObject {
    const object = this.store.get(resource, namespace, name);
    if (!object) throw KubeApiError.notFound(resource, name);
    return object;
  }

  /** DELETE: the pod itself (as the real server answers for pods), or a Status for other kinds once gone. */
  private deleteObject(response: http.ServerResponse, resource: Resource, namespace: string | null, name: string, query: URLSearchParams, body: string): void {
    const options = (body.trim() ? parseJson(body) : {}) as { gracePeriodSeconds?: number; propagationPolicy?: string; orphanDependents?: boolean; preconditions?: DeleteOptions['preconditions'] };
    const grace = query.has('gracePeriodSeconds') ? Number(query.get('gracePeriodSeconds')) : options.gracePeriodSeconds;
    if (grace !== undefined && (!Number.isInteger(grace) || grace < 0)) throw KubeApiError.badRequest(`invalid gracePeriodSeconds: ${String(grace)}`);
    const orphan = query.get('orphanDependents') === 'true' || options.orphanDependents === true;
    const policy = query.get('propagationPolicy') ?? options.propagationPolicy ?? (orphan ? 'Orphan' : undefined);
    if (policy !== undefined && !['Orphan', 'Background', 'Foreground'].includes(policy)) {
      throw KubeApiError.invalid('DeleteOptions', '', [{ reason: 'FieldValueNotSupported', field: 'propagationPolicy', message: `Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan", "nil"` }]);
    }
    const { object, removed } = this.store.delete(resource, namespace, name, { gracePeriodSeconds: grace, propagationPolicy: policy as PropagationPolicy | undefined, preconditions: options.preconditions });
    if (resource === 'pods' || !removed) return this.sendJson(response, 200, object);
    this.sendJson(response, 200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind: resource, uid: object.metadata.uid } });
  }

  private podLog(response: http.ServerResponse, namespace: string, name: string, query: URLSearchParams): void {
    const pod = asModel<V1Pod>(this.found('pods', namespace, name));
    const containers = (pod.spec?.containers ?? []).map((container) => container.name);
    const initContainers = (pod.spec?.initContainers ?? []).map((container) => container.name);
    let container = query.get('container');
    if (!container) {
      if (containers.length !== 1) {
        throw KubeApiError.badRequest(`a container name must be specified for pod ${name}, choose one of: [${containers.join(' ')}]${initContainers.length ? ` or one of the init containers: [${initContainers.join(' ')}]` : ''}`);
      }
      container = containers[0];
    }
    if (!containers.includes(container) && !initContainers.includes(container)) throw KubeApiError.badRequest(`container ${container} is not valid for pod ${name}`);
    const previous = query.get('previous') === 'true';
    const lines = this.logSource?.logs(namespace, name, container, previous);
    if (!lines) {
      if (previous) throw KubeApiError.badRequest(`previous terminated container "${container}" in pod "${name}" not found`);
      const status = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].find((candidate) => candidate.name === container);
      throw KubeApiError.badRequest(`container "${container}" in pod "${name}" is waiting to start: ${status?.state?.waiting?.reason ?? 'ContainerCreating'}`);
    }
    const tail = query.has('tailLines') ? lines.slice(-Number(query.get('tailLines'))) : lines;
    let text = tail.map((entry) => `${query.get('timestamps') === 'true' ? `${entry.time} ` : ''}${entry.line}\n`).join('');
    if (query.has('limitBytes')) text = Buffer.from(text).subarray(0, Number(query.get('limitBytes'))).toString('utf8');
    this.writeHead(response, 200, { 'content-type': 'text/plain' }).end(text);
  }

  /**
   * A watch: a chunked stream of `{"type","object"}` lines. Without a resource version (or "0"),
   * it starts with an ADDED for every current object; with one, it replays what changed after
   * it, or answers ERROR 410 Expired when that is older than the history. A change that makes an
   * object match or stop matching the selectors is sent as ADDED or DELETED, as the real server does.
   */
  private watch(response: http.ServerResponse, resource: Resource, namespace: string | null, query: URLSearchParams): void {
    const matches = this.store.matcher(resource, { labelSelector: query.get('labelSelector'), fieldSelector: query.get('fieldSelector') });
    const versionParameter = query.get('resourceVersion');
    const from = versionParameter && versionParameter !== '0' ? Number(versionParameter) : null;
    if (from !== null && !Number.isInteger(from)) throw KubeApiError.badRequest(`invalid resource version: ${versionParameter}`);
    this.writeHead(response, 200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'cache-control': 'no-cache, private' });
    // The client's watch awaits the response headers before it reports being connected: send them now.
    response.flushHeaders();
    const send = (type: string, object: unknown) => {
      if (!response.writableEnded) response.write(`${JSON.stringify({ type, object })}\n`);
    };
    const deliver = (change: StoreChange) => {
      if (change.resource !== resource || (namespace !== null && change.object.metadata.namespace !== namespace)) return;
      const now = matches(change.object);
      const before = change.previous !== undefined && matches(change.previous);
      if (change.type === 'ADDED' && now) send('ADDED', change.object);
      if (change.type === 'DELETED' && now) send('DELETED', change.object);
      if (change.type === 'MODIFIED') {
        if (now && before) send('MODIFIED', change.object);
        else if (now) send('ADDED', change.object);
        else if (before) send('DELETED', change.object);
      }
    };
    if (from === null) {
      for (const object of this.store.list(resource, namespace)) if (matches(object)) send('ADDED', object);
    } else {
      const changes = this.store.changesAfter(from);
      if ('expired' in changes) {
        send('ERROR', new KubeApiError(410, 'Expired', `too old resource version: ${from} (${changes.expired})`).toStatus());
        response.end();
        return;
      }
      for (const change of changes) deliver(change);
    }
    const unsubscribe = this.store.subscribe(deliver);
    this.openWatches.add(response);
    const timers: NodeJS.Timeout[] = [];
    if (query.get('allowWatchBookmarks') === 'true') {
      timers.push(setInterval(() => send('BOOKMARK', { kind: RESOURCES[resource].kind, apiVersion: 'v1', metadata: { resourceVersion: this.store.resourceVersion } }), this.options.bookmarkIntervalMs ?? 1_000));
    }
    if (query.has('timeoutSeconds')) timers.push(setTimeout(() => response.end(), Number(query.get('timeoutSeconds')) * 1000));
    const finish = () => {
      unsubscribe();
      for (const timer of timers) clearTimeout(timer);
      this.openWatches.delete(response);
    };
    // The response's close, not the request's: a request closes once its body is read.
    response.once('close', finish);
  }

  private discovery(response: http.ServerResponse, at: string): void {
    if (at === '/version') return this.sendJson(response, 200, { major: '1', minor: '31', gitVersion: 'v1.31.0-fake', platform: 'linux/amd64' });
    if (at === '/api') return this.sendJson(response, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: `127.0.0.1:${this.port}` }] });
    const verbs: Record<Resource, string[]> = {
      pods: ['create', 'delete', 'get', 'list', 'watch'], secrets: ['create', 'delete', 'get', 'list', 'update', 'watch'],
      events: ['get', 'list', 'watch'], nodes: ['get', 'list', 'watch'],
    };
    this.sendJson(response, 200, {
      kind: 'APIResourceList', groupVersion: 'v1',
      resources: [
        ...(Object.keys(RESOURCES) as Resource[]).map((resource) => ({ name: resource, singularName: '', namespaced: RESOURCES[resource].namespaced, kind: RESOURCES[resource].kind, verbs: verbs[resource] })),
        { name: 'pods/log', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] },
      ],
    });
  }

  private sendJson(response: http.ServerResponse, code: number, body: unknown): void {
    this.writeHead(response, code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  /** Every answer goes through here, so the request log has its status before the client sees it. */
  private writeHead(response: http.ServerResponse, code: number, headers: http.OutgoingHttpHeaders): http.ServerResponse {
    const record = this.records.get(response);
    if (record) record.status = code;
    return response.writeHead(code, headers);
  }
}

type Route =
  | { readonly kind: 'discovery'; readonly path: string }
  | { readonly kind: 'object'; readonly resource: Resource; readonly namespace: string | null; readonly name?: string; readonly subresource?: string };

/** `/api/v1/nodes[/n]`, `/api/v1/{pods,secrets,events}` (all namespaces), `/api/v1/namespaces/{ns}/{resource}[/{name}[/log]]`. */
function parseRoute(pathname: string): Route | null {
  if (pathname === '/version' || pathname === '/api' || pathname === '/api/v1') return { kind: 'discovery', path: pathname };
  const parts = pathname.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] !== 'api' || parts[1] !== 'v1') return null;
  const rest = parts.slice(2);
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    const [, namespace, resource, name, subresource, ...extra] = rest;
    if (!isResource(resource) || !RESOURCES[resource].namespaced || extra.length > 0) return null;
    if (subresource !== undefined && !(resource === 'pods' && subresource === 'log')) return null;
    return { kind: 'object', resource, namespace, ...(name !== undefined ? { name } : {}), ...(subresource ? { subresource } : {}) };
  }
  const [resource, name, ...extra] = rest;
  if (!resource || !isResource(resource) || extra.length > 0) return null;
  // A namespaced resource is listed or watched across namespaces here, never read by name.
  if (RESOURCES[resource].namespaced && name !== undefined) return null;
  return { kind: 'object', resource, namespace: null, ...(name !== undefined ? { name } : {}) };
}

/** The RBAC verb a request needs; undefined for what the fake does not serve. */
function routeAccess(route: Route, method: string, query: URLSearchParams): Access | undefined {
  if (route.kind !== 'object') return undefined;
  const { resource, namespace, name, subresource } = route;
  const watching = query.get('watch') === 'true' || query.get('watch') === '1';
  let verb: Verb | undefined;
  if (subresource === 'log') verb = method === 'GET' ? 'get' : undefined;
  else if (name === undefined) verb = method === 'GET' ? (watching ? 'watch' : 'list') : method === 'POST' && resource !== 'nodes' && namespace !== null ? 'create' : undefined;
  else if (method === 'GET') verb = 'get';
  else if (method === 'PUT' && resource === 'secrets') verb = 'update';
  else if (method === 'DELETE' && (resource === 'pods' || resource === 'secrets')) verb = 'delete';
  if (!verb) return undefined;
  return { verb, resource: subresource ? `${resource}/${subresource}` : resource, namespace, ...(name !== undefined ? { name } : {}) };
}

async function readBody(request: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch (error) {
    throw KubeApiError.badRequest(`the body of the request could not be decoded: ${(error as Error).message}`);
  }
}
