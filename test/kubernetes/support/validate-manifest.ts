/**
 * Validates a manifest against the real Kubernetes OpenAPI schemas (kubernetes-models): every
 * object the provider writes, and the RBAC in deploy/kubernetes, go through it in tests.
 */
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Pod } from 'kubernetes-models/v1/Pod';
import { Secret } from 'kubernetes-models/v1/Secret';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/Pod': Pod, 'v1/Secret': Secret, 'v1/ServiceAccount': ServiceAccount,
  'rbac.authorization.k8s.io/v1/Role': Role, 'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding, 'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
};

/** Throws, naming the object and the schema's complaint, when the manifest is not valid. */
export function validateManifest(manifest: { apiVersion?: string; kind?: string; metadata?: { name?: string } }): void {
  const key = `${manifest.apiVersion}/${manifest.kind}`;
  const Model = MODELS[key];
  if (!Model) throw new Error(`no schema here for ${key}`);
  // Round-trip through JSON: dates become the strings the API would send.
  const data = JSON.parse(JSON.stringify(manifest)) as never;
  try {
    new Model(data).validate();
  } catch (error) {
    throw new Error(`${key} ${manifest.metadata?.name ?? ''} is not valid: ${(error as Error).message}`);
  }
}
