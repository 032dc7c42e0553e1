import type { AgentEngineKind } from '../../common/engine-kinds';
import type { Deployment } from '../deployments/deployment.entity';
import type { ReplicaManager } from './replica-manager';

/** `Hello.engine.kind` of the agents' built-in CPU engine: weights-free, it answers with placeholder words. */
export const STAND_IN_ENGINE_KIND = 'cpu' satisfies AgentEngineKind;

/** This server's agent launcher (providers/local-provider.ts): the engine it starts a deployment's agents with. */
export interface AgentEngines {
  engineOf(deployment: Deployment): string;
}

/** Providers whose agents this server starts itself, so it knows their engine before they say Hello. */
const LAUNCHED_HERE: ReadonlySet<string> = new Set(['local', 'market']);

/**
 * Which engines serve a deployment, for the surfaces that must say what answers (GET
 * /v1/models, the start-up banner). The truth is what each replica's agent said in Hello; a
 * replica this server launches that has not said it yet (just placed, or every replica right
 * after a start) counts with the engine its agent is started with. Agents of static hosts and
 * external deployments are unknown until they say Hello.
 */
export class DeploymentEngines {
  constructor(
    private readonly replicas: Pick<ReplicaManager, 'listActive'>,
    /** This server's agent launcher (null with LOCAL_AGENTS=false: it launches none). */
    private readonly localAgents: AgentEngines | null,
  ) {}

  async of(deployment: Deployment): Promise<ReadonlySet<string>> {
    const launched = (provider: string) => (LAUNCHED_HERE.has(provider) ? this.localAgents?.engineOf(deployment) : undefined);
    const kinds = new Set<string>();
    for (const replica of await this.replicas.listActive(deployment.id)) {
      const kind = replica.engineKind ?? launched(replica.provider);
      if (kind) kinds.add(kind);
    }
    // No replica placed yet (or all ended, e.g. paused): what the next ones would run.
    const next = kinds.size === 0 ? launched(deployment.provider) : undefined;
    if (next) kinds.add(next);
    return kinds;
  }
}
