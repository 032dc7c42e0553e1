/**
 * What the fake API server knows about each resource it serves: its kind, whether it lives in a
 * namespace, the fields it can be filtered on, and what the real API server checks and fills in
 * when one is written (names, labels, Secret data, a Pod's defaults and admission). Errors are
 * thrown as KubeApiError carrying the real server's reason, code and wording.
 */
import type { V1Container, V1Pod, V1Toleration } from '@kubernetes/client-node';

export type Resource = 'pods' | 'secrets' | 'events' | 'nodes';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** Object metadata in its wire form (timestamps are RFC 3339 strings). */
export interface ObjectMeta {
  name: string;
  generateName?: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  creationTimestamp: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
}

/** An object as the API server stores and sends it: JSON, with whatever fields its kind has. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface StatusCause {
  readonly reason: string;
  readonly message: string;
  readonly field: string;
}

/** A failure the API server answers with a Status object. */
export class KubeApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: { name?: string; kind?: string; uid?: string; causes?: StatusCause[] },
  ) {
    super(message);
  }

  static notFound(resource: string, name: string): KubeApiError {
    return new KubeApiError(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource });
  }

  static alreadyExists(resource: string, name: string): KubeApiError {
    return new KubeApiError(409, 'AlreadyExists', `${resource} "${name}" already exists`, { name, kind: resource });
  }

  static conflict(resource: string, name: string): KubeApiError {
    return new KubeApiError(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`, { name, kind: resource });
  }

  static badRequest(message: string): KubeApiError {
    return new KubeApiError(400, 'BadRequest', message);
  }

  static invalid(kind: string, name: string, causes: StatusCause[]): KubeApiError {
    const text = causes.map((cause) => `${cause.field}: ${cause.message}`);
    return new KubeApiError(422, 'Invalid', `${kind} "${name}" is invalid: ${text.length === 1 ? text[0] : `[${text.join(', ')}]`}`, { name, kind, causes });
  }

  /** The Status object the server answers with. */
  toStatus(): Record<string, unknown> {
    return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: this.message, reason: this.reason, ...(this.details ? { details: this.details } : {}), code: this.code };
  }
}

interface ResourceInfo {
  readonly kind: string;
  readonly namespaced: boolean;
  /** Field selectors the real server accepts for this resource. */
  readonly fields: readonly string[];
}

const META_FIELDS = ['metadata.name', 'metadata.namespace'];

export const RESOURCES: Record<Resource, ResourceInfo> = {
  pods: {
    kind: 'Pod', namespaced: true,
    fields: [...META_FIELDS, 'spec.nodeName', 'spec.restartPolicy', 'spec.schedulerName', 'spec.serviceAccountName', 'spec.hostNetwork', 'status.phase', 'status.podIP', 'status.nominatedNodeName'],
  },
  secrets: { kind: 'Secret', namespaced: true, fields: [...META_FIELDS, 'type'] },
  events: {
    kind: 'Event', namespaced: true,
    fields: [...META_FIELDS, 'involvedObject.kind', 'involvedObject.namespace', 'involvedObject.name', 'involvedObject.uid', 'involvedObject.apiVersion',
      'involvedObject.resourceVersion', 'involvedObject.fieldPath', 'reason', 'reportingComponent', 'source', 'type'],
  },
  nodes: { kind: 'Node', namespaced: false, fields: [...META_FIELDS, 'spec.unschedulable'] },
};

const KIND_TO_RESOURCE: Record<string, Resource> = { Pod: 'pods', Secret: 'secrets', Event: 'events', Node: 'nodes' };

export function resourceOfKind(kind: string): Resource | undefined {
  return KIND_TO_RESOURCE[kind];
}

export function isResource(name: string): name is Resource {
  return Object.prototype.hasOwnProperty.call(RESOURCES, name);
}

/** Events' `source` field selector means `source.component`. */
export function readField(resource: Resource, object: unknown, field: string): string {
  const path = resource === 'events' && field === 'source' ? 'source.component' : field;
  const value = path.split('.').reduce<unknown>((current, key) => (current !== null && typeof current === 'object' ? (current as Record<string, unknown>)[key] : undefined), object);
  return value === undefined || value === null ? '' : String(value);
}

/** Timestamps as the API server writes them (RFC 3339, whole seconds). */
export function kubeTime(date: Date = new Date()): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}

// ---- validation ------------------------------------------------------------------------------

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const MAX_SECRET_BYTES = 1024 * 1024;

const SUBDOMAIN_MESSAGE = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MESSAGE = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MESSAGE = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

function invalidValue(field: string, value: unknown, message: string): StatusCause {
  return { reason: 'FieldValueInvalid', field, message: `Invalid value: ${JSON.stringify(value)}: ${message}` };
}

function required(field: string): StatusCause {
  return { reason: 'FieldValueRequired', field, message: 'Required value' };
}

function labelCauses(field: string, labels: unknown): StatusCause[] {
  if (labels === undefined) return [];
  if (labels === null || typeof labels !== 'object') return [invalidValue(field, labels, 'must be a map of strings')];
  const causes: StatusCause[] = [];
  for (const [key, value] of Object.entries(labels as Record<string, unknown>)) {
    const slash = key.lastIndexOf('/');
    const prefix = slash >= 0 ? key.slice(0, slash) : '';
    const name = slash >= 0 ? key.slice(slash + 1) : key;
    if ((prefix && (!DNS_SUBDOMAIN.test(prefix) || prefix.length > 253)) || !LABEL_NAME.test(name) || name.length > 63) {
      causes.push(invalidValue(field, key, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
    }
    if (field.endsWith('labels') && (typeof value !== 'string' || !LABEL_VALUE.test(value) || value.length > 63)) {
      causes.push(invalidValue(field, value, LABEL_VALUE_MESSAGE));
    }
  }
  return causes;
}

function ownerCauses(owners: unknown): StatusCause[] {
  if (owners === undefined) return [];
  if (!Array.isArray(owners)) return [invalidValue('metadata.ownerReferences', owners, 'must be a list')];
  const causes: StatusCause[] = [];
  for (const owner of owners as Array<Partial<OwnerReference>>) {
    if (!owner.apiVersion) causes.push(invalidValue('metadata.ownerReferences.apiVersion', '', 'version must not be empty'));
    if (!owner.kind) causes.push(invalidValue('metadata.ownerReferences.kind', '', 'kind must not be empty'));
    if (!owner.name) causes.push(invalidValue('metadata.ownerReferences.name', '', 'name must not be empty'));
    if (!owner.uid) causes.push(invalidValue('metadata.ownerReferences.uid', '', 'uid must not be empty'));
  }
  return causes;
}

function containerCauses(field: string, containers: unknown, needed: boolean): StatusCause[] {
  if (containers === undefined || (Array.isArray(containers) && containers.length === 0)) return needed ? [required(field)] : [];
  if (!Array.isArray(containers)) return [invalidValue(field, containers, 'must be a list')];
  const causes: StatusCause[] = [];
  (containers as Array<Partial<V1Container>>).forEach((container, index) => {
    const at = `${field}[${index}]`;
    if (!container.name) causes.push(required(`${at}.name`));
    else if (!DNS_LABEL.test(container.name) || container.name.length > 63) causes.push(invalidValue(`${at}.name`, container.name, LABEL_MESSAGE));
    if (!container.image) causes.push(required(`${at}.image`));
    for (const [envIndex, variable] of (container.env ?? []).entries()) {
      if (!variable.name) causes.push(required(`${at}.env[${envIndex}].name`));
      const reference = variable.valueFrom?.secretKeyRef;
      if (reference && (!reference.key || !reference.name)) causes.push(required(`${at}.env[${envIndex}].valueFrom.secretKeyRef.${reference.key ? 'name' : 'key'}`));
    }
  });
  return causes;
}

/**
 * Checks a new or replacing object the way the API server's validation does, and fills in what
 * the server fills in (Secret `stringData` into `data`; a Pod's defaults and admission). Throws
 * KubeApiError; returns the object to store.
 */
export function admit(resource: Resource, object: KubeObject): KubeObject {
  const { kind } = RESOURCES[resource];
  const name = object.metadata.name;
  const causes: StatusCause[] = [];
  if (!DNS_SUBDOMAIN.test(name) || name.length > 253) causes.push(invalidValue('metadata.name', name, SUBDOMAIN_MESSAGE));
  causes.push(...labelCauses('metadata.labels', object.metadata.labels), ...labelCauses('metadata.annotations', object.metadata.annotations), ...ownerCauses(object.metadata.ownerReferences));
  if (resource === 'pods') {
    const spec = (object.spec ?? {}) as Partial<V1Pod['spec']>;
    causes.push(...containerCauses('spec.containers', spec?.containers, true), ...containerCauses('spec.initContainers', spec?.initContainers, false));
  }
  if (resource === 'secrets') causes.push(...secretCauses(object));
  if (causes.length > 0) throw KubeApiError.invalid(kind, name, causes);
  if (resource === 'secrets') return normaliseSecret(object);
  if (resource === 'pods') return defaultPod(object);
  return object;
}

function secretCauses(object: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const data = (object.data ?? {}) as Record<string, unknown>;
  const stringData = (object.stringData ?? {}) as Record<string, unknown>;
  let bytes = 0;
  for (const [key, value] of Object.entries(data)) {
    if (typeof value !== 'string' || !BASE64.test(value) || value.length % 4 !== 0) {
      // The real server fails to decode the body before validating it.
      throw KubeApiError.badRequest(`Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0 (data[${key}])`);
    }
    bytes += Buffer.from(value, 'base64').length;
    if (!SECRET_KEY.test(key)) causes.push(invalidValue(`data[${key}]`, key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"));
  }
  for (const [key, value] of Object.entries(stringData)) {
    if (!SECRET_KEY.test(key)) causes.push(invalidValue(`stringData[${key}]`, key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"));
    bytes += Buffer.byteLength(String(value));
  }
  if (bytes > MAX_SECRET_BYTES) causes.push({ reason: 'FieldValueTooLong', field: 'data', message: `Too long: must have at most ${MAX_SECRET_BYTES} bytes` });
  return causes;
}

/** The server keeps `data` only: `stringData` is merged into it (base64) and not stored. */
function normaliseSecret(object: KubeObject): KubeObject {
  const { stringData, ...rest } = object;
  const data: Record<string, string> = { ...((object.data ?? {}) as Record<string, string>) };
  for (const [key, value] of Object.entries((stringData ?? {}) as Record<string, unknown>)) data[key] = Buffer.from(String(value)).toString('base64');
  return { ...rest, type: object.type ?? 'Opaque', data };
}

/** What the real API server fills in on a new Pod: defaults, the admission plugins' tolerations, its status. */
function defaultPod(object: KubeObject): KubeObject {
  const spec = structuredClone(object.spec ?? {}) as NonNullable<V1Pod['spec']>;
  spec.restartPolicy ??= 'Always';
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.schedulerName ??= 'default-scheduler';
  spec.serviceAccountName ??= 'default';
  spec.serviceAccount ??= spec.serviceAccountName;
  spec.securityContext ??= {};
  spec.enableServiceLinks ??= true;
  spec.priority ??= 0;
  spec.preemptionPolicy ??= 'PreemptLowerPriority';
  for (const container of [...(spec.initContainers ?? []), ...spec.containers]) {
    container.terminationMessagePath ??= '/dev/termination-log';
    container.terminationMessagePolicy ??= 'File';
    const tag = container.image!.includes('@') ? 'digest' : /:[^/]+$/.exec(container.image!)?.[0]?.slice(1) ?? 'latest';
    container.imagePullPolicy ??= tag === 'latest' ? 'Always' : 'IfNotPresent';
    // Requests default to limits (resources the container only limits are requested as much).
    if (container.resources?.limits) {
      container.resources.requests = { ...container.resources.limits, ...container.resources.requests };
    }
    container.resources ??= {};
  }
  // DefaultTolerationSeconds admission: 5 minutes on a node that is not ready or unreachable.
  const tolerations: V1Toleration[] = [...(spec.tolerations ?? [])];
  for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
    if (!tolerations.some((toleration) => (toleration.key === key || (toleration.key === undefined && toleration.operator === 'Exists')) && (toleration.effect === undefined || toleration.effect === 'NoExecute'))) {
      tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
    }
  }
  spec.tolerations = tolerations;
  return { ...object, spec, status: { phase: 'Pending', qosClass: qosClass(spec.containers) } };
}

function qosClass(containers: V1Container[]): string {
  const computeResources = ['cpu', 'memory'];
  const limits = containers.map((container) => container.resources?.limits ?? {});
  const requests = containers.map((container) => container.resources?.requests ?? {});
  const anySet = [...limits, ...requests].some((set) => computeResources.some((resource) => set[resource] !== undefined));
  if (!anySet) return 'BestEffort';
  const guaranteed = containers.every((_, index) => computeResources.every((resource) => limits[index][resource] !== undefined && limits[index][resource] === requests[index][resource]));
  return guaranteed ? 'Guaranteed' : 'Burstable';
}
