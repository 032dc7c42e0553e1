/**
 * A fake Kubernetes API server for tests (there is no kube-apiserver on these machines): plain
 * HTTP on 127.0.0.1, bearer-token auth, the part of core/v1 the provider uses — nodes; pods with
 * create, get, list, delete (graceful: a deletion timestamp, then gone once the kubelet stopped
 * it) and watch from a resource version (410 Expired when too old); secrets with optimistic
 * concurrency and owner garbage collection; events — answered with real Status objects. It is
 * the test's counterpart at a boundary we do not own, reached through the official client and a
 * real kubeconfig; TestKubelet (test-kubelet.ts) plays the scheduler and the kubelet beside it.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig, type CoreV1Event, type V1Node, type V1Pod, type V1Secret, type V1Taint } from '@kubernetes/client-node';

type Kind = 'pods' | 'secrets' | 'events';
type KubeObject = { apiVersion?: string; kind?: string; metadata?: Record<string, any> } & Record<string, any>;
export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface WatchEvent {
  readonly resourceVersion: number;
  readonly type: WatchType;
  readonly kind: Kind;
  readonly object: KubeObject;
}

/** Watch events kept for watches that resume from a resource version; older ones answer 410. */
const HISTORY = 1_000;
const KIND_OF: Record<Kind, string> = { pods: 'Pod', secrets: 'Secret', events: 'Event' };

export interface NodeInput {
  readonly name: string;
  readonly labels?: Record<string, string>;
  readonly allocatable: Record<string, string>;
  readonly taints?: V1Taint[];
}

export class FakeKubeApi {
  private server: http.Server | null = null;
  private port = 0;
  private resourceVersion = 0;
  private readonly nodesByName = new Map<string, V1Node>();
  private readonly objects: Record<Kind, Map<string, KubeObject>> = { pods: new Map(), secrets: new Map(), events: new Map() };
  private readonly history: WatchEvent[] = [];
  private readonly watchers = new Set<{ kind: Kind; namespace: string | null; selector: string | undefined; response: http.ServerResponse }>();
  private readonly changes = new EventEmitter();
  /** Every object created through the HTTP API, as it was sent (schema checks in tests). */
  private readonly createdObjects: KubeObject[] = [];
  /** Requests served: method, path, query (what a test may check the provider asked). */
  readonly requests: Array<{ method: string; path: string; query: string }> = [];
  /** Set when a kubelet runs pods: deletions then wait for it to finish them. */
  kubeletAttached = false;

  constructor(private readonly options: { token: string }) {
    this.changes.setMaxListeners(50);
  }

  async start(): Promise<void> {
    this.server = http.createServer((request, response) => {
      void this.handle(request, response).catch((error: Error) => this.status(response, 500, 'InternalError', error.message));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const watcher of this.watchers) watcher.response.end();
    this.watchers.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Writes a kubeconfig (JSON, which is YAML) for this server and returns its path. */
  writeKubeconfig(file: string, namespace: string): string {
    fs.writeFileSync(file, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'fake',
      // The client refuses plain http unless TLS checks are off (there is no TLS to check here).
      clusters: [{ name: 'fake', cluster: { server: this.url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'tester', user: { token: this.options.token } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'tester', namespace } }],
    }));
    return file;
  }

  kubeConfig(namespace: string): KubeConfig {
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }], users: [{ name: 'tester', token: this.options.token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'tester', namespace }], currentContext: 'fake',
    });
    return config;
  }

  // ---- the programmatic side (tests, the kubelet) ------------------------------------------

  addNode(input: NodeInput): V1Node {
    const node: V1Node = {
      apiVersion: 'v1', kind: 'Node',
      metadata: { name: input.name, uid: randomUUID(), labels: { 'kubernetes.io/hostname': input.name, ...input.labels }, resourceVersion: String(++this.resourceVersion), creationTimestamp: new Date() },
      spec: { taints: input.taints ?? [] },
      status: { allocatable: { ...input.allocatable }, capacity: { ...input.allocatable }, conditions: [{ type: 'Ready', status: 'True' }] },
    };
    this.nodesByName.set(input.name, node);
    this.changes.emit('node');
    return node;
  }

  removeNode(name: string): void {
    this.nodesByName.delete(name);
    this.changes.emit('node');
  }

  nodes(): V1Node[] {
    return [...this.nodesByName.values()];
  }

  pods(): V1Pod[] {
    return [...this.objects.pods.values()] as V1Pod[];
  }

  secrets(): V1Secret[] {
    return [...this.objects.secrets.values()] as V1Secret[];
  }

  events(): CoreV1Event[] {
    return [...this.objects.events.values()] as CoreV1Event[];
  }

  created(): KubeObject[] {
    return this.createdObjects;
  }

  /** Told of every pod change (ADDED, MODIFIED, DELETED) and of node changes ('node'). */
  onPod(listener: (type: WatchType, pod: V1Pod) => void): void {
    this.changes.on('pod', listener);
  }

  onNode(listener: () => void): void {
    this.changes.on('node', listener);
  }

  /** A pod created behind the platform's back (a leftover of an earlier run). */
  createPod(namespace: string, pod: V1Pod): V1Pod {
    return this.create('pods', namespace, structuredClone(pod)) as V1Pod;
  }

  /** Changes a pod in place (the kubelet's status updates); null when it is gone. */
  updatePod(namespace: string, name: string, change: (pod: V1Pod) => void): V1Pod | null {
    const pod = this.objects.pods.get(`${namespace}/${name}`);
    if (!pod) return null;
    change(pod as V1Pod);
    pod.metadata!.resourceVersion = String(++this.resourceVersion);
    this.publish('pods', 'MODIFIED', pod);
    return pod as V1Pod;
  }

  /** The pod's containers have stopped: it is gone. */
  removePod(namespace: string, name: string): void {
    const pod = this.objects.pods.get(`${namespace}/${name}`);
    if (!pod) return;
    this.objects.pods.delete(`${namespace}/${name}`);
    pod.metadata!.resourceVersion = String(++this.resourceVersion);
    this.publish('pods', 'DELETED', pod);
  }

  /** Records an event about an object, as the scheduler and kubelet do. */
  recordEvent(namespace: string, involved: { kind: string; name: string }, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const name = `${involved.name}.${(++this.resourceVersion).toString(16)}`;
    this.objects.events.set(`${namespace}/${name}`, {
      apiVersion: 'v1', kind: 'Event', metadata: { name, namespace, uid: randomUUID(), resourceVersion: String(this.resourceVersion) },
      involvedObject: { kind: involved.kind, name: involved.name, namespace }, type, reason, message, count: 1,
      firstTimestamp: new Date().toISOString(), lastTimestamp: new Date().toISOString(), source: { component: reason === 'FailedScheduling' || reason === 'Scheduled' ? 'default-scheduler' : 'kubelet' },
    });
  }

  // ---- HTTP ---------------------------------------------------------------------------------

  private async handle(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', this.url);
    this.requests.push({ method: request.method ?? 'GET', path: url.pathname, query: url.search });
    if (request.headers.authorization !== `Bearer ${this.options.token}`) {
      this.status(response, 401, 'Unauthorized', 'Unauthorized');
      return;
    }
    const body = await readJson(request);
    const parts = url.pathname.split('/').filter(Boolean);
    const query = url.searchParams;
    // /api/v1/nodes[/name]
    if (parts[0] === 'api' && parts[1] === 'v1' && parts[2] === 'nodes') {
      if (request.method !== 'GET') return this.status(response, 405, 'MethodNotAllowed', 'the fake only reads nodes');
      if (parts[3]) {
        const node = this.nodesByName.get(parts[3]);
        return node ? this.json(response, 200, node) : this.status(response, 404, 'NotFound', `nodes "${parts[3]}" not found`);
      }
      const items = this.nodes().filter((node) => matchesLabels(node.metadata?.labels ?? {}, query.get('labelSelector') ?? undefined));
      return this.json(response, 200, { apiVersion: 'v1', kind: 'NodeList', metadata: { resourceVersion: String(this.resourceVersion) }, items });
    }
    // /api/v1/pods (every namespace)
    if (parts[0] === 'api' && parts[1] === 'v1' && (parts[2] === 'pods' || parts[2] === 'secrets' || parts[2] === 'events') && parts.length === 3) {
      return this.list(response, parts[2] as Kind, null, query);
    }
    // /api/v1/namespaces/{ns}/{kind}[/{name}[/log]]
    if (parts[0] === 'api' && parts[1] === 'v1' && parts[2] === 'namespaces' && parts[3] && ['pods', 'secrets', 'events'].includes(parts[4])) {
      const namespace = parts[3];
      const kind = parts[4] as Kind;
      const name = parts[5];
      if (!name) {
        if (request.method === 'GET') return query.get('watch') === 'true' || query.get('watch') === '1' ? this.watch(request, response, kind, namespace, query) : this.list(response, kind, namespace, query);
        if (request.method === 'POST') {
          const object = body as KubeObject;
          if (!object?.metadata?.name) return this.status(response, 422, 'Invalid', `${KIND_OF[kind]} "" is invalid: metadata.name: Required value`);
          if (this.objects[kind].has(`${namespace}/${object.metadata.name}`)) return this.status(response, 409, 'AlreadyExists', `${kind} "${object.metadata.name}" already exists`);
          this.createdObjects.push(structuredClone(object));
          return this.json(response, 201, this.create(kind, namespace, object));
        }
        return this.status(response, 405, 'MethodNotAllowed', 'method not allowed');
      }
      if (parts[6] === 'log' && kind === 'pods') {
        const pod = this.objects.pods.get(`${namespace}/${name}`);
        response.writeHead(pod ? 200 : 404, { 'content-type': 'text/plain' }).end(pod ? String(pod.metadata?.annotations?.['fake/log'] ?? '') : '');
        return;
      }
      const key = `${namespace}/${name}`;
      const existing = this.objects[kind].get(key);
      if (!existing) return this.status(response, 404, 'NotFound', `${kind} "${name}" not found`);
      if (request.method === 'GET') return this.json(response, 200, existing);
      if (request.method === 'PUT') {
        const replacement = body as KubeObject;
        const stated = replacement?.metadata?.resourceVersion;
        if (stated && stated !== existing.metadata!.resourceVersion) {
          return this.status(response, 409, 'Conflict', `Operation cannot be fulfilled on ${kind} "${name}": the object has been modified; please apply your changes to the latest version and try again`);
        }
        const updated = normalise(kind, { ...replacement, metadata: { ...replacement.metadata, uid: existing.metadata!.uid, creationTimestamp: existing.metadata!.creationTimestamp, namespace, name, resourceVersion: String(++this.resourceVersion) } });
        this.objects[kind].set(key, updated);
        this.publish(kind, 'MODIFIED', updated);
        return this.json(response, 200, updated);
      }
      if (request.method === 'DELETE') {
        const options = (body ?? {}) as { gracePeriodSeconds?: number };
        const grace = query.has('gracePeriodSeconds') ? Number(query.get('gracePeriodSeconds')) : options.gracePeriodSeconds;
        return this.json(response, 200, this.delete(kind, namespace, name, grace));
      }
      return this.status(response, 405, 'MethodNotAllowed', 'method not allowed');
    }
    this.status(response, 404, 'NotFound', `the server could not find the requested resource (${url.pathname})`);
  }

  private create(kind: Kind, namespace: string, object: KubeObject): KubeObject {
    const stored = normalise(kind, {
      ...object, apiVersion: 'v1', kind: KIND_OF[kind],
      metadata: { ...object.metadata, namespace, uid: randomUUID(), creationTimestamp: new Date().toISOString(), resourceVersion: String(++this.resourceVersion) },
    });
    if (kind === 'pods') stored.status = { phase: 'Pending', ...(object.status ?? {}) };
    this.objects[kind].set(`${namespace}/${stored.metadata!.name}`, stored);
    this.publish(kind, 'ADDED', stored);
    return stored;
  }

  private delete(kind: Kind, namespace: string, name: string, grace: number | undefined): KubeObject {
    const key = `${namespace}/${name}`;
    const object = this.objects[kind].get(key)!;
    if (kind === 'pods' && this.kubeletAttached) {
      // Graceful: marked, and removed by the kubelet once its containers stopped.
      if (!object.metadata!.deletionTimestamp) {
        object.metadata!.deletionTimestamp = new Date().toISOString();
        object.metadata!.deletionGracePeriodSeconds = grace ?? object.spec?.terminationGracePeriodSeconds ?? 30;
        object.metadata!.resourceVersion = String(++this.resourceVersion);
        this.publish(kind, 'MODIFIED', object);
      }
      return object;
    }
    this.objects[kind].delete(key);
    object.metadata!.resourceVersion = String(++this.resourceVersion);
    this.publish(kind, 'DELETED', object);
    // The garbage collector: what this object owned goes too.
    const uid = object.metadata!.uid;
    for (const dependentKind of ['pods', 'secrets'] as Kind[]) {
      for (const dependent of [...this.objects[dependentKind].values()]) {
        if ((dependent.metadata?.ownerReferences ?? []).some((owner: { uid: string }) => owner.uid === uid)) {
          this.delete(dependentKind, dependent.metadata!.namespace, dependent.metadata!.name, undefined);
        }
      }
    }
    return object;
  }

  private list(response: http.ServerResponse, kind: Kind, namespace: string | null, query: URLSearchParams): void {
    const items = [...this.objects[kind].values()].filter((object) => (namespace === null || object.metadata?.namespace === namespace)
      && matchesLabels(object.metadata?.labels ?? {}, query.get('labelSelector') ?? undefined) && matchesFields(object, query.get('fieldSelector') ?? undefined));
    this.json(response, 200, { apiVersion: 'v1', kind: `${KIND_OF[kind]}List`, metadata: { resourceVersion: String(this.resourceVersion) }, items });
  }

  private watch(request: http.IncomingMessage, response: http.ServerResponse, kind: Kind, namespace: string, query: URLSearchParams): void {
    const from = Number(query.get('resourceVersion') ?? this.resourceVersion);
    const selector = query.get('labelSelector') ?? undefined;
    response.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // The client's watch waits for the headers: send them now, not with the first event.
    response.flushHeaders();
    const oldest = this.history[0]?.resourceVersion ?? this.resourceVersion + 1;
    if (from > 0 && from < oldest - 1 && this.history.length >= HISTORY) {
      response.write(`${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${from} (${oldest - 1})`, reason: 'Expired', code: 410 } })}\n`);
      response.end();
      return;
    }
    const watcher = { kind, namespace, selector, response };
    for (const event of this.history) {
      if (event.resourceVersion > from && event.kind === kind && event.object.metadata?.namespace === namespace && matchesLabels(event.object.metadata?.labels ?? {}, selector)) {
        response.write(`${JSON.stringify({ type: event.type, object: event.object })}\n`);
      }
    }
    this.watchers.add(watcher);
    request.on('close', () => this.watchers.delete(watcher));
  }

  private publish(kind: Kind, type: WatchType, object: KubeObject): void {
    const snapshot = structuredClone(object);
    this.history.push({ resourceVersion: Number(snapshot.metadata!.resourceVersion), type, kind, object: snapshot });
    if (this.history.length > HISTORY) this.history.shift();
    for (const watcher of this.watchers) {
      if (watcher.kind !== kind || watcher.namespace !== snapshot.metadata?.namespace || !matchesLabels(snapshot.metadata?.labels ?? {}, watcher.selector)) continue;
      watcher.response.write(`${JSON.stringify({ type, object: snapshot })}\n`);
    }
    if (kind === 'pods') this.changes.emit('pod', type, structuredClone(snapshot));
  }

  private json(response: http.ServerResponse, code: number, body: unknown): void {
    response.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  private status(response: http.ServerResponse, code: number, reason: string, message: string): void {
    this.json(response, code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });
  }
}

/** Secrets keep `data` (base64) only, as the API server stores `stringData`. */
function normalise(kind: Kind, object: KubeObject): KubeObject {
  if (kind !== 'secrets' || !object.stringData) return object;
  const data: Record<string, string> = { ...(object.data ?? {}) };
  for (const [key, value] of Object.entries(object.stringData as Record<string, string>)) data[key] = Buffer.from(value).toString('base64');
  const { stringData: _stringData, ...rest } = object;
  return { ...rest, data };
}

async function readJson(request: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  if (chunks.length === 0) return undefined;
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

/** `a=b,c!=d,e,!f` (equality, inequality, existence). */
export function matchesLabels(labels: Record<string, string>, selector: string | undefined): boolean {
  if (!selector) return true;
  return selector.split(',').map((term) => term.trim()).filter(Boolean).every((term) => {
    const unequal = /^([^!=]+)!=(.*)$/.exec(term);
    if (unequal) return labels[unequal[1]] !== unequal[2];
    const equal = /^([^!=]+)==?(.*)$/.exec(term);
    if (equal) return labels[equal[1]] === equal[2];
    if (term.startsWith('!')) return !(term.slice(1) in labels);
    return term in labels;
  });
}

/** `spec.nodeName=x,status.phase!=Failed` on the few fields the provider filters by. */
function matchesFields(object: KubeObject, selector: string | undefined): boolean {
  if (!selector) return true;
  return selector.split(',').filter(Boolean).every((term) => {
    const match = /^([^!=]+)(!=|==|=)(.*)$/.exec(term.trim());
    if (!match) return true;
    const value = match[1].split('.').reduce<unknown>((current, key) => (current as Record<string, unknown> | undefined)?.[key], object);
    return match[2] === '!=' ? String(value ?? '') !== match[3] : String(value ?? '') === match[3];
  });
}
