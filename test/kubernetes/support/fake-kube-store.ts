/**
 * The fake API server's storage, behaving as the real one's does: one global resource version
 * (a counter, sent as a string) stamped on every write; a bounded history of changes from which
 * watches resume (older resource versions are "expired", as after etcd compaction); graceful pod
 * deletion (a deletion timestamp first, gone once the kubelet stopped the containers); and the
 * garbage collector (dependents of a deleted owner, found by `metadata.ownerReferences[].uid`,
 * deleted in the background or before their owner, or orphaned; dependents whose owner does not
 * exist are deleted too). Listeners hear every change in order, one at a time, even when a
 * listener writes in turn (the kubelet reacts to a pod change by changing the pod).
 */
import { randomUUID } from 'node:crypto';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector, SelectorError } from './kube-selectors';
import { admit, KubeApiError, kubeTime, readField, RESOURCES, resourceOfKind, type KubeObject, type ObjectMeta, type OwnerReference, type Resource } from './fake-kube-resources';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreChange {
  readonly resourceVersion: number;
  readonly type: WatchEventType;
  readonly resource: Resource;
  /** The object after the change (for DELETED: as it was removed, with the deletion's resource version). */
  readonly object: KubeObject;
  /** The object before a MODIFIED change (a watch with a selector turns a change into ADDED or DELETED). */
  readonly previous?: KubeObject;
}

export type PropagationPolicy = 'Orphan' | 'Background' | 'Foreground';

export interface DeleteOptions {
  readonly gracePeriodSeconds?: number;
  readonly propagationPolicy?: PropagationPolicy;
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string };
}

export interface FakeKubeStoreOptions {
  /** Changes kept for watches that resume from a resource version (default 1000). */
  readonly historyLimit?: number;
  /** When given, only these namespaces exist: creating elsewhere is 404 as on a real server. */
  readonly namespaces?: readonly string[];
  /** How long the garbage collector takes to notice an owner's deletion (default 20 ms; it is asynchronous on a real cluster too). */
  readonly gcDelayMs?: number;
}

export interface Selectors {
  readonly labelSelector?: string | null;
  readonly fieldSelector?: string | null;
}

const FOREGROUND = 'foregroundDeletion';
const GENERATED_NAME_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

export class FakeKubeStore {
  private revision = 0;
  /** The resource version of the newest change no longer in the history (0: nothing dropped yet). */
  private compactedThrough = 0;
  private readonly objects: Record<Resource, Map<string, KubeObject>> = { pods: new Map(), secrets: new Map(), events: new Map(), nodes: new Map() };
  private readonly history: StoreChange[] = [];
  private readonly listeners = new Set<(change: StoreChange) => void>();
  private readonly queue: StoreChange[] = [];
  private dispatching = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly namespaces: Set<string> | null;
  private readonly historyLimit: number;
  private readonly gcDelayMs: number;
  private closed = false;
  /** Set while a kubelet runs the pods: deleting a bound pod then waits for it (see `delete`). */
  gracefulPodDeletion = false;

  constructor(options: FakeKubeStoreOptions = {}) {
    this.historyLimit = options.historyLimit ?? 1_000;
    this.gcDelayMs = options.gcDelayMs ?? 20;
    this.namespaces = options.namespaces ? new Set(options.namespaces) : null;
  }

  get resourceVersion(): string {
    return String(this.revision);
  }

  addNamespace(name: string): void {
    this.namespaces?.add(name);
  }

  /** Hears every change, in order; returns the unsubscribe. */
  subscribe(listener: (change: StoreChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.listeners.clear();
  }

  // ---- reads --------------------------------------------------------------------------------

  get(resource: Resource, namespace: string | null, name: string): KubeObject | undefined {
    const object = this.objects[resource].get(key(resource, namespace, name));
    return object && structuredClone(object);
  }

  /** Throws KubeApiError (400) for a selector the real server would refuse. */
  list(resource: Resource, namespace: string | null, selectors: Selectors = {}): KubeObject[] {
    const matches = this.matcher(resource, selectors);
    return [...this.objects[resource].values()]
      .filter((object) => (namespace === null || object.metadata.namespace === namespace) && matches(object))
      .map((object) => structuredClone(object));
  }

  matcher(resource: Resource, selectors: Selectors): (object: KubeObject) => boolean {
    try {
      const labels = parseLabelSelector(selectors.labelSelector);
      const fields = parseFieldSelector(selectors.fieldSelector, RESOURCES[resource].fields);
      return (object) => matchesLabels(labels, object.metadata.labels) && matchesFields(fields, object, (target, field) => readField(resource, target, field));
    } catch (error) {
      if (error instanceof SelectorError) throw KubeApiError.badRequest(error.message);
      throw error;
    }
  }

  /** Changes after a resource version, or `expired` when the history no longer reaches back to it. */
  changesAfter(resourceVersion: number): StoreChange[] | { expired: number } {
    if (resourceVersion < this.compactedThrough) return { expired: this.compactedThrough + 1 };
    return this.history.filter((change) => change.resourceVersion > resourceVersion);
  }

  // ---- writes -------------------------------------------------------------------------------

  /** A new object from a request body (validated and defaulted as the real server does). */
  create(resource: Resource, namespace: string | null, body: unknown): KubeObject {
    const input = parseBody(resource, namespace, body);
    if (input.metadata.resourceVersion) throw KubeApiError.badRequest('resourceVersion should not be set on objects to be created');
    const { kind } = RESOURCES[resource];
    if (!input.metadata.name && input.metadata.generateName) input.metadata.name = generateName(input.metadata.generateName);
    if (!input.metadata.name) {
      throw KubeApiError.invalid(kind, '', [{ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' }]);
    }
    if (namespace !== null && this.namespaces && !this.namespaces.has(namespace)) throw KubeApiError.notFound('namespaces', namespace);
    if (this.objects[resource].has(key(resource, namespace, input.metadata.name))) throw KubeApiError.alreadyExists(resource, input.metadata.name);
    const admitted = admit(resource, input);
    const metadata: ObjectMeta = {
      ...admitted.metadata, ...(namespace !== null ? { namespace } : {}), uid: randomUUID(), creationTimestamp: kubeTime(),
      resourceVersion: String(++this.revision), ...(resource === 'pods' ? { generation: 1 } : {}),
    };
    delete metadata.deletionTimestamp;
    delete metadata.deletionGracePeriodSeconds;
    const stored: KubeObject = { ...admitted, apiVersion: 'v1', kind, metadata };
    this.objects[resource].set(key(resource, namespace, metadata.name), stored);
    this.publish({ resourceVersion: this.revision, type: 'ADDED', resource, object: structuredClone(stored) });
    if (stored.metadata.ownerReferences?.length) this.later(() => this.collectIfOwnersAbsent(resource, namespace, metadata.name, metadata.uid));
    return structuredClone(stored);
  }

  /** Replaces an object (PUT): 409 Conflict when the body's resource version is not the current one. */
  replace(resource: Resource, namespace: string | null, name: string, body: unknown): KubeObject {
    const existing = this.objects[resource].get(key(resource, namespace, name));
    if (!existing) throw KubeApiError.notFound(resource, name);
    const input = parseBody(resource, namespace, body);
    if (input.metadata.name && input.metadata.name !== name) throw KubeApiError.badRequest(`the name of the object (${input.metadata.name}) does not match the name on the URL (${name})`);
    if (input.metadata.uid && input.metadata.uid !== existing.metadata.uid) {
      throw new KubeApiError(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": Precondition failed: UID in precondition: ${input.metadata.uid}, UID in object meta: ${existing.metadata.uid}`, { name, kind: resource });
    }
    if (input.metadata.resourceVersion && input.metadata.resourceVersion !== existing.metadata.resourceVersion) throw KubeApiError.conflict(resource, name);
    const admitted = admit(resource, { ...input, metadata: { ...input.metadata, name } });
    const stored: KubeObject = {
      ...admitted, apiVersion: 'v1', kind: existing.kind,
      metadata: {
        ...admitted.metadata, name, ...(namespace !== null ? { namespace } : {}), uid: existing.metadata.uid, creationTimestamp: existing.metadata.creationTimestamp,
        resourceVersion: String(++this.revision),
        ...(existing.metadata.deletionTimestamp ? { deletionTimestamp: existing.metadata.deletionTimestamp, deletionGracePeriodSeconds: existing.metadata.deletionGracePeriodSeconds } : {}),
      },
    };
    this.objects[resource].set(key(resource, namespace, name), stored);
    this.publish({ resourceVersion: this.revision, type: 'MODIFIED', resource, object: structuredClone(stored), previous: structuredClone(existing) });
    return structuredClone(stored);
  }

  /** Changes an object in place, unchecked (the scheduler's binding, the kubelet's status); undefined when it is gone. */
  update(resource: Resource, namespace: string | null, name: string, change: (object: KubeObject) => void): KubeObject | undefined {
    const existing = this.objects[resource].get(key(resource, namespace, name));
    if (!existing) return undefined;
    const next = structuredClone(existing);
    change(next);
    next.metadata = { ...next.metadata, name, uid: existing.metadata.uid, resourceVersion: String(++this.revision) };
    this.objects[resource].set(key(resource, namespace, name), next);
    this.publish({ resourceVersion: this.revision, type: 'MODIFIED', resource, object: structuredClone(next), previous: structuredClone(existing) });
    return structuredClone(next);
  }

  /** A server-side object that no request created (a node, an event): stored as given, with server metadata. */
  insert(resource: Resource, object: Omit<KubeObject, 'metadata'> & { metadata: Partial<ObjectMeta> & { name: string } }): KubeObject {
    const namespace = RESOURCES[resource].namespaced ? object.metadata.namespace ?? 'default' : null;
    if (this.objects[resource].has(key(resource, namespace, object.metadata.name))) throw KubeApiError.alreadyExists(resource, object.metadata.name);
    const stored: KubeObject = {
      ...structuredClone(object), apiVersion: 'v1', kind: RESOURCES[resource].kind,
      metadata: { ...structuredClone(object.metadata), ...(namespace !== null ? { namespace } : {}), uid: randomUUID(), creationTimestamp: kubeTime(), resourceVersion: String(++this.revision) },
    };
    this.objects[resource].set(key(resource, namespace, stored.metadata.name), stored);
    this.publish({ resourceVersion: this.revision, type: 'ADDED', resource, object: structuredClone(stored) });
    return structuredClone(stored);
  }

  /**
   * A delete request. Pods bound to a node while a kubelet runs them are deleted gracefully: they
   * get a deletion timestamp (now + grace period) and stay until the kubelet removes them; a
   * later delete may shorten the grace period. Unbound or finished pods, a grace period of 0 and
   * pods with no kubelet attached go at once, as on a real server. `Foreground` keeps the owner
   * (deletion timestamp, `foregroundDeletion` finalizer) until its blocking dependents are gone.
   */
  delete(resource: Resource, namespace: string | null, name: string, options: DeleteOptions = {}): { object: KubeObject; removed: boolean } {
    const existing = this.objects[resource].get(key(resource, namespace, name));
    if (!existing) throw KubeApiError.notFound(resource, name);
    const { preconditions } = options;
    if (preconditions?.uid && preconditions.uid !== existing.metadata.uid) {
      throw new KubeApiError(409, 'Conflict', `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${existing.metadata.uid}`, { name, kind: resource });
    }
    if (preconditions?.resourceVersion && preconditions.resourceVersion !== existing.metadata.resourceVersion) {
      throw new KubeApiError(409, 'Conflict', `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ResourceVersion in object meta: ${existing.metadata.resourceVersion}`, { name, kind: resource });
    }
    if (resource === 'pods' && this.deletesGracefully(existing, options.gracePeriodSeconds)) {
      const spec = existing.spec as { terminationGracePeriodSeconds?: number } | undefined;
      const grace = options.gracePeriodSeconds ?? spec?.terminationGracePeriodSeconds ?? 30;
      const current = existing.metadata.deletionGracePeriodSeconds;
      if (existing.metadata.deletionTimestamp && current !== undefined && grace >= current) return { object: structuredClone(existing), removed: false };
      const object = this.update(resource, namespace, name, (pod) => {
        pod.metadata.deletionTimestamp = kubeTime(new Date(Date.now() + grace * 1000));
        pod.metadata.deletionGracePeriodSeconds = grace;
      })!;
      return { object, removed: false };
    }
    if (existing.metadata.deletionTimestamp && existing.metadata.finalizers?.includes(FOREGROUND)) return { object: structuredClone(existing), removed: false };
    const policy = options.propagationPolicy ?? 'Background';
    if (policy === 'Foreground' && this.dependentsOf(existing.metadata.uid).length > 0) {
      const object = this.update(resource, namespace, name, (owner) => {
        owner.metadata.deletionTimestamp = kubeTime();
        owner.metadata.deletionGracePeriodSeconds = 0;
        owner.metadata.finalizers = [...(owner.metadata.finalizers ?? []), FOREGROUND];
      })!;
      this.later(() => this.deleteDependents(existing.metadata.uid, 'Foreground'));
      // Dependents that do not block it (no blockOwnerDeletion) do not hold the owner back.
      this.finishForegroundDeletions();
      return { object, removed: !this.objects[resource].has(key(resource, namespace, name)) };
    }
    return { object: this.remove(resource, namespace, name, policy)!, removed: true };
  }

  /** Removes an object now (a finished graceful deletion, a force delete) and lets the garbage collector at its dependents. */
  remove(resource: Resource, namespace: string | null, name: string, policy: PropagationPolicy = 'Background'): KubeObject | undefined {
    const existing = this.objects[resource].get(key(resource, namespace, name));
    if (!existing) return undefined;
    this.objects[resource].delete(key(resource, namespace, name));
    const object: KubeObject = { ...structuredClone(existing), metadata: { ...structuredClone(existing.metadata), resourceVersion: String(++this.revision) } };
    this.publish({ resourceVersion: this.revision, type: 'DELETED', resource, object: structuredClone(object) });
    const { uid } = existing.metadata;
    if (policy === 'Orphan') {
      for (const dependent of this.dependentsOf(uid)) {
        this.update(dependent.resource, dependent.namespace, dependent.name, (target) => {
          target.metadata.ownerReferences = target.metadata.ownerReferences?.filter((owner) => owner.uid !== uid);
        });
      }
    } else if (this.dependentsOf(uid).length > 0) {
      this.later(() => this.deleteDependents(uid, 'Background'));
    }
    this.finishForegroundDeletions();
    return object;
  }

  // ---- the garbage collector ----------------------------------------------------------------

  private deletesGracefully(pod: KubeObject, gracePeriodSeconds: number | undefined): boolean {
    const phase = (pod.status as { phase?: string } | undefined)?.phase;
    const bound = Boolean((pod.spec as { nodeName?: string } | undefined)?.nodeName);
    return this.gracefulPodDeletion && bound && gracePeriodSeconds !== 0 && phase !== 'Succeeded' && phase !== 'Failed';
  }

  private dependentsOf(uid: string): Array<{ resource: Resource; namespace: string | null; name: string; object: KubeObject }> {
    const found: Array<{ resource: Resource; namespace: string | null; name: string; object: KubeObject }> = [];
    for (const resource of Object.keys(this.objects) as Resource[]) {
      for (const object of this.objects[resource].values()) {
        if (object.metadata.ownerReferences?.some((owner) => owner.uid === uid)) {
          found.push({ resource, namespace: object.metadata.namespace ?? null, name: object.metadata.name, object });
        }
      }
    }
    return found;
  }

  /** An owner reference names an object that exists with that uid (kinds the fake does not serve count as existing). */
  private ownerExists(dependent: KubeObject, owner: OwnerReference): boolean {
    const resource = resourceOfKind(owner.kind);
    if (!resource || (owner.apiVersion !== undefined && owner.apiVersion !== 'v1')) return true;
    const namespace = RESOURCES[resource].namespaced ? dependent.metadata.namespace ?? null : null;
    return this.objects[resource].get(key(resource, namespace, owner.name))?.metadata.uid === owner.uid;
  }

  private deleteDependents(uid: string, ownerPolicy: PropagationPolicy): void {
    for (const dependent of this.dependentsOf(uid)) {
      const others = (dependent.object.metadata.ownerReferences ?? []).filter((owner) => owner.uid !== uid && this.ownerExists(dependent.object, owner));
      if (others.length > 0) {
        // Still owned by someone else: only this reference goes.
        this.update(dependent.resource, dependent.namespace, dependent.name, (target) => {
          target.metadata.ownerReferences = target.metadata.ownerReferences?.filter((owner) => owner.uid !== uid);
        });
        continue;
      }
      if (dependent.object.metadata.deletionTimestamp) continue;
      this.delete(dependent.resource, dependent.namespace, dependent.name, { propagationPolicy: ownerPolicy === 'Foreground' ? 'Foreground' : 'Background' });
    }
    this.finishForegroundDeletions();
  }

  /** A dependent created with owners none of which exist is deleted, as the real garbage collector does. */
  private collectIfOwnersAbsent(resource: Resource, namespace: string | null, name: string, uid: string): void {
    const object = this.objects[resource].get(key(resource, namespace, name));
    if (!object || object.metadata.uid !== uid || object.metadata.deletionTimestamp) return;
    const owners = object.metadata.ownerReferences ?? [];
    if (owners.length > 0 && owners.every((owner) => !this.ownerExists(object, owner))) this.delete(resource, namespace, name, {});
  }

  /** Owners deleted in the foreground go once no dependent that blocks them is left. */
  private finishForegroundDeletions(): void {
    for (const resource of Object.keys(this.objects) as Resource[]) {
      for (const owner of [...this.objects[resource].values()]) {
        if (!owner.metadata.deletionTimestamp || !owner.metadata.finalizers?.includes(FOREGROUND)) continue;
        const blocking = this.dependentsOf(owner.metadata.uid)
          .filter((dependent) => dependent.object.metadata.ownerReferences?.some((reference) => reference.uid === owner.metadata.uid && reference.blockOwnerDeletion));
        if (blocking.length === 0) this.remove(resource, owner.metadata.namespace ?? null, owner.metadata.name);
      }
    }
  }

  // ---- plumbing -----------------------------------------------------------------------------

  private later(action: () => void): void {
    if (this.closed) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.closed) action();
    }, this.gcDelayMs);
    this.timers.add(timer);
  }

  private publish(change: StoreChange): void {
    this.history.push(change);
    while (this.history.length > this.historyLimit) this.compactedThrough = this.history.shift()!.resourceVersion;
    this.queue.push(change);
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      while (this.queue.length > 0) {
        const next = this.queue.shift()!;
        for (const listener of [...this.listeners]) {
          try {
            listener(next);
          } catch (error) {
            // A broken listener is a bug in the test's fake cluster: make it loud, not a 500 to the client.
            queueMicrotask(() => {
              throw error;
            });
          }
        }
      }
    } finally {
      this.dispatching = false;
    }
  }
}

function key(resource: Resource, namespace: string | null, name: string): string {
  return RESOURCES[resource].namespaced ? `${namespace ?? ''}/${name}` : name;
}

function generateName(prefix: string): string {
  let suffix = '';
  for (let index = 0; index < 5; index++) suffix += GENERATED_NAME_CHARS[Math.floor(Math.random() * GENERATED_NAME_CHARS.length)];
  return `${prefix}${suffix}`;
}

/** A request body as an object of this resource: JSON object, metadata present, namespace matching the URL's. */
function parseBody(resource: Resource, namespace: string | null, body: unknown): KubeObject {
  const { kind } = RESOURCES[resource];
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw KubeApiError.badRequest(`the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`);
  const object = structuredClone(body) as Partial<KubeObject>;
  if (object.kind !== undefined && object.kind !== kind) throw KubeApiError.badRequest(`${object.kind} in version "v1" cannot be handled as a ${kind}: the object provided is unrecognized`);
  const metadata = (object.metadata ?? {}) as Partial<ObjectMeta>;
  if (namespace !== null && metadata.namespace !== undefined && metadata.namespace !== namespace) {
    throw KubeApiError.badRequest('the namespace of the provided object does not match the namespace sent on the request');
  }
  return { ...object, apiVersion: 'v1', kind, metadata: metadata as ObjectMeta };
}
