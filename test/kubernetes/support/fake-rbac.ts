/**
 * RBAC as the API server's authorizer applies it, for the requests the fake serves: what each
 * request needs (verb, resource or resource/subresource, namespace or cluster scope, name), and
 * whether a Role in one namespace plus a ClusterRole grant it. The fake records what was needed
 * so a test can hold the shipped Role and ClusterRole against it, and it can enforce them (403
 * in the real server's words) so a missing permission fails the test instead of a cluster.
 */
import type { V1PolicyRule } from '@kubernetes/client-node';

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

export interface Access {
  readonly verb: Verb;
  /** `pods`, `nodes`, or `pods/log` for a subresource. */
  readonly resource: string;
  /** null: cluster scope (a cluster-scoped resource, or a namespaced one across all namespaces). */
  readonly namespace: string | null;
  readonly name?: string;
}

export interface RbacGrants {
  /** The user named in 403 messages, e.g. `system:serviceaccount:inference:inference-control-plane`. */
  readonly user?: string;
  /** The namespace the Role is bound in (its rules apply there only). */
  readonly roleNamespace?: string;
  readonly roleRules?: readonly V1PolicyRule[];
  /** Rules bound cluster-wide (a ClusterRoleBinding): every namespace and the cluster scope. */
  readonly clusterRoleRules?: readonly V1PolicyRule[];
}

function ruleAllows(rule: V1PolicyRule, access: Access): boolean {
  const groups = rule.apiGroups ?? [];
  if (!groups.includes('') && !groups.includes('*')) return false;
  const resources = rule.resources ?? [];
  // `*` is every resource and subresource, `*/log` that subresource of any resource; otherwise exactly `pods` or `pods/log`.
  const subresource = access.resource.split('/')[1];
  const resourceMatches = resources.includes('*') || resources.includes(access.resource) || (subresource !== undefined && resources.includes(`*/${subresource}`));
  if (!resourceMatches) return false;
  if (!rule.verbs.includes('*') && !rule.verbs.includes(access.verb)) return false;
  // resourceNames restrict requests naming one object; a list, watch or create names none.
  if (rule.resourceNames && rule.resourceNames.length > 0) return access.name !== undefined && rule.resourceNames.includes(access.name);
  return true;
}

export function allows(grants: RbacGrants, access: Access): boolean {
  if ((grants.clusterRoleRules ?? []).some((rule) => ruleAllows(rule, access))) return true;
  if (access.namespace === null || access.namespace !== grants.roleNamespace) return false;
  return (grants.roleRules ?? []).some((rule) => ruleAllows(rule, access));
}

/** The accesses these grants do not cover (empty: the Role and ClusterRole are enough). */
export function notGranted(accesses: readonly Access[], grants: RbacGrants): Access[] {
  return accesses.filter((access) => !allows(grants, access));
}

/** The real authorizer's 403 message. */
export function forbiddenMessage(grants: RbacGrants, access: Access): string {
  const subject = access.name ? `${access.resource.split('/')[0]} "${access.name}"` : access.resource.split('/')[0];
  const scope = access.namespace === null ? 'at the cluster scope' : `in the namespace "${access.namespace}"`;
  return `${subject} is forbidden: User "${grants.user ?? 'system:serviceaccount:default:default'}" cannot ${access.verb} resource "${access.resource}" in API group "" ${scope}`;
}
