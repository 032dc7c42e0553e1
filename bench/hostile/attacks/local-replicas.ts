/**
 * Local replicas from a zero-credit key (issue 33): `localDeployments` deployments on the
 * `local` provider (agent processes on the server's own host, $0 an hour), each created with
 * one replica and then scaled to `localReplicas`. The benchmark counts the agent processes the
 * server starts. At 4102d34 a workspace with zero credit started 8 agents this way: up to 64
 * per deployment, and deployments were uncapped.
 */
import { round, Tally, type AttackJob, type AttackReport, type HostileAttack } from '../attack';
import { graphql } from '../http-call';

class LocalReplicas implements HostileAttack {
  private readonly answers = new Tally();
  private readonly created: string[] = [];
  private scaled = 0;
  private startedAt = 0;

  constructor(private readonly job: AttackJob) {}

  private async mutation(query: string, variables: Record<string, unknown>): Promise<any> {
    const answer = await graphql(this.job.target.port, this.job.target.keys[0], query, variables, { timeoutMs: this.job.settings.timeoutMs });
    this.answers.add(answer.error ? `${answer.status} ${answer.error}` : `${answer.status}`);
    return answer.error ? null : (JSON.parse(answer.text) as { data: any }).data;
  }

  async go(): Promise<void> {
    this.startedAt = performance.now();
    const { localDeployments, localReplicas } = this.job.settings;
    for (let index = 0; index < localDeployments; index++) {
      const data = await this.mutation('mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { id } } }', {
        input: { modelId: this.job.target.modelId, priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1, provider: 'local' },
      });
      const id = data?.createDeployment?.deployment?.id as string | undefined;
      if (!id) continue;
      this.created.push(id);
      const scaled = await this.mutation('mutation($id: ID!, $count: Int!) { updateDeployment(id: $id, input: {minReplicas: $count, maxReplicas: $count}) { id desiredReplicas } }', { id, count: localReplicas });
      if (scaled?.updateDeployment?.desiredReplicas === localReplicas) this.scaled++;
    }
  }

  async stop(): Promise<AttackReport> {
    const seconds = (performance.now() - this.startedAt) / 1000;
    const { localDeployments, localReplicas } = this.job.settings;
    return {
      achieved: {
        'deployments created': `${this.created.length} of ${localDeployments}`,
        [`scaled to ${localReplicas} replicas`]: this.scaled,
        'replicas asked for': this.created.length === 0 ? 0 : this.scaled * localReplicas + (this.created.length - this.scaled),
      },
      answers: this.answers.counts, seconds: round(seconds),
    };
  }
}

export function localReplicas(job: AttackJob): HostileAttack {
  return new LocalReplicas(job);
}
