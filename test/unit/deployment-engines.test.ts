import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { DeploymentEngines } from '../../control-plane/replicas/deployment-engines';
import type { Replica } from '../../control-plane/replicas/replica.entity';

const deployment = (provider: string) => ({ id: 'dep_1', provider } as Deployment);
const replica = (provider: string, engineKind: string | null) => ({ provider, engineKind } as Replica);
const engines = (replicas: Replica[], launched: string | null) =>
  new DeploymentEngines({ listActive: async () => replicas }, launched === null ? null : { engineOf: () => launched });

describe('the engines serving a deployment', () => {
  it('are what its replicas said in Hello', async () => {
    expect(await engines([replica('local', 'llama-cpp'), replica('local', 'cpu')], 'cpu').of(deployment('local'))).toEqual(new Set(['llama-cpp', 'cpu']));
  });

  it('count a replica this server launches with its agent\'s engine before it says Hello, and predict one when none is placed', async () => {
    expect(await engines([replica('market', null)], 'cpu').of(deployment('market'))).toEqual(new Set(['cpu']));
    expect(await engines([], 'llama-cpp').of(deployment('local'))).toEqual(new Set(['llama-cpp']));
  });

  it('are unknown for agents started elsewhere until they say Hello', async () => {
    expect(await engines([replica('external', null)], 'cpu').of(deployment('external'))).toEqual(new Set());
    expect(await engines([], 'cpu').of(deployment('static'))).toEqual(new Set());
    expect(await engines([], null).of(deployment('local'))).toEqual(new Set());
    expect(await engines([replica('external', 'openai')], 'cpu').of(deployment('external'))).toEqual(new Set(['openai']));
  });
});
