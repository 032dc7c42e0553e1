/**
 * deploy/kubernetes/rbac.yaml: every object valid against the Kubernetes schemas, and the rules
 * exactly the provider's needs (docs/kubernetes.md, "Permissions"). A permission added to the
 * file without being added here fails: least privilege is kept on purpose, not by habit.
 */
import fs from 'node:fs';
import path from 'node:path';
// The YAML parser @kubernetes/client-node itself uses. Its loadAllYaml would map the objects onto
// the client's classes, silently dropping unknown keys (a misspelled field): parsed raw here.
import yaml from 'js-yaml';
import { validateManifest } from './support/validate-manifest';

const FILE = path.join(__dirname, '../../deploy/kubernetes/rbac.yaml');
const NAME = 'inference-control-plane';
const NAMESPACE = 'inference';

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}
interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  [key: string]: unknown;
}

/** The rights each role may hold, resource by resource (all in the core API group). */
const NAMESPACED: Record<string, string[]> = {
  pods: ['create', 'get', 'list', 'watch', 'delete'],
  'pods/log': ['get'],
  // list: the reconcile after a restart finds the provider's Secrets by label (kubernetes-provider.ts).
  secrets: ['create', 'get', 'list', 'update', 'delete'],
  events: ['get', 'list', 'watch'],
};
const CLUSTER_WIDE: Record<string, string[]> = {
  nodes: ['get', 'list', 'watch'],
  pods: ['list'],
};

const manifests = (yaml.loadAll(fs.readFileSync(FILE, 'utf8')) as Array<Manifest | null | undefined>).filter((doc): doc is Manifest => doc != null);

function only(kind: string): Manifest {
  const found = manifests.filter((manifest) => manifest.kind === kind);
  expect(found.map((manifest) => `${manifest.kind}/${manifest.metadata.name}`)).toEqual([`${kind}/${NAME}`]);
  return found[0];
}

/** Each rule as `resource: verbs`, after checking it can grant nothing but that. */
function grants(role: Manifest): Record<string, string[]> {
  const rules = role.rules as Rule[];
  expect(Array.isArray(rules)).toBe(true);
  const granted: Record<string, string[]> = {};
  for (const rule of rules) {
    // No resourceNames (would narrow, but is not how this file is meant), no nonResourceURLs,
    // nothing else a future schema might give a meaning to.
    expect(Object.keys(rule).sort()).toEqual(['apiGroups', 'resources', 'verbs']);
    expect(rule.apiGroups).toEqual(['']);
    for (const value of [...rule.apiGroups!, ...rule.resources!, ...rule.verbs!]) expect(value).not.toContain('*');
    for (const resource of rule.resources!) {
      expect(granted[resource]).toBeUndefined(); // one rule per resource, so each reads whole
      granted[resource] = [...rule.verbs!].sort();
    }
  }
  return granted;
}

const sortedValues = (rights: Record<string, string[]>) => Object.fromEntries(Object.entries(rights).map(([resource, verbs]) => [resource, [...verbs].sort()]));

describe('deploy/kubernetes/rbac.yaml', () => {
  it('holds exactly a ServiceAccount, a Role, a ClusterRole and their two bindings, each valid', () => {
    expect(manifests.map((manifest) => manifest.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'ServiceAccount']);
    for (const manifest of manifests) validateManifest(manifest);
  });

  it('puts the namespaced objects in the namespace, the cluster-wide ones in none', () => {
    for (const kind of ['ServiceAccount', 'Role', 'RoleBinding']) expect(only(kind).metadata.namespace).toBe(NAMESPACE);
    for (const kind of ['ClusterRole', 'ClusterRoleBinding']) expect(only(kind).metadata.namespace).toBeUndefined();
  });

  it('grants in the namespace: pods, pods/log, secrets and events, with these verbs only', () => {
    expect(grants(only('Role'))).toEqual(sortedValues(NAMESPACED));
  });

  it('grants across the cluster: reading nodes and listing pods, nothing else', () => {
    const clusterRole = only('ClusterRole');
    // An aggregation rule would pull in other roles' rules.
    expect(clusterRole.aggregationRule).toBeUndefined();
    expect(grants(clusterRole)).toEqual(sortedValues(CLUSTER_WIDE));
  });

  it('binds each role to the ServiceAccount alone', () => {
    const subject = [{ kind: 'ServiceAccount', name: NAME, namespace: NAMESPACE }];
    expect(only('RoleBinding')).toMatchObject({ roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: NAME } });
    expect(only('RoleBinding').subjects).toEqual(subject);
    expect(only('ClusterRoleBinding')).toMatchObject({ roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: NAME } });
    expect(only('ClusterRoleBinding').subjects).toEqual(subject);
  });

  it('the schema check does catch a broken object', () => {
    const role = only('Role');
    expect(() => validateManifest({ ...role, rules: [{ apiGroups: [''], resources: 'pods', verbs: ['get'] }] })).toThrow(/Role inference-control-plane is not valid/);
    expect(() => validateManifest({ ...only('RoleBinding'), roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role' } })).toThrow(/not valid/);
    expect(() => validateManifest({ apiVersion: 'apps/v1', kind: 'Deployment' })).toThrow(/no schema/);
  });
});
