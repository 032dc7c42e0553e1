/**
 * 450-alias `usage` queries (issue 33): one GraphQL query of `usageAliases` aliases of the
 * workspace's `usage` over the last 30 days (3 fields each: within the cost and token limits),
 * `usageParallel` of them back to back at once. Each alias is one aggregate over the
 * workspace's usage records, which the benchmark seeds beforehand (a tenant with a history);
 * at 4102d34 such a query took 5.4 s and four in parallel held the 10-connection pool, so that
 * other tenants' `createApiKey` waited 10 s.
 */
import http from 'node:http';
import { percentile } from '../../paced-client';
import { round, Tally, type AttackJob, type AttackReport, type HostileAttack } from '../attack';
import { graphql } from '../http-call';

/** The query, and its variables: the last 30 days. */
export function usageAliasQuery(aliases: number): { query: string; variables: Record<string, string> } {
  const fields = Array.from({ length: aliases }, (_, index) => `u${index}: usage(from: $from, to: $to) { key requests totalTokens }`).join(' ');
  return {
    query: `query($from: DateTimeISO!, $to: DateTimeISO!) { ${fields} }`,
    variables: { from: new Date(Date.now() - 30 * 86_400_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString() },
  };
}

class UsageAliases implements HostileAttack {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  private readonly answers = new Tally();
  private readonly times: number[] = [];
  private stopped = false;
  private startedAt = 0;
  private loops: Promise<void>[] = [];
  private alone = { ms: 0, answer: '' };

  constructor(private readonly job: AttackJob) {}

  /** One query alone first, so the report says what one costs without the others beside it. */
  async prepare(): Promise<void> {
    const { query, variables } = usageAliasQuery(this.job.settings.usageAliases);
    const answer = await graphql(this.job.target.port, this.job.target.keys[0], query, variables, { agent: this.agent, timeoutMs: 120_000 });
    this.alone = { ms: round(answer.ms), answer: answer.error ? `${answer.status} ${answer.error}` : `${answer.status}, ${answer.text.length} bytes` };
  }

  async go(): Promise<void> {
    this.startedAt = performance.now();
    this.loops = Array.from({ length: this.job.settings.usageParallel }, () => this.loop());
  }

  private async loop(): Promise<void> {
    const { query, variables } = usageAliasQuery(this.job.settings.usageAliases);
    while (!this.stopped) {
      const answer = await graphql(this.job.target.port, this.job.target.keys[0], query, variables, { agent: this.agent, timeoutMs: this.job.settings.timeoutMs });
      if (this.stopped && answer.error === 'timeout') break;
      this.times.push(answer.ms);
      this.answers.add(answer.error ? `${answer.status} ${answer.error}` : `${answer.status}`);
    }
  }

  async stop(): Promise<AttackReport> {
    this.stopped = true;
    const seconds = (performance.now() - this.startedAt) / 1000;
    // In-flight queries are let finish (they hold the pool until they do; cutting the socket does not stop them).
    await Promise.race([Promise.all(this.loops), new Promise((resolve) => setTimeout(resolve, this.job.settings.timeoutMs))]);
    this.agent.destroy();
    const sorted = [...this.times].sort((left, right) => left - right);
    return {
      achieved: {
        'one query alone (before the phase)': `${this.alone.ms} ms, ${this.alone.answer}`,
        'queries answered': this.times.length,
        'query p50 / max ms': `${round(percentile(sorted, 0.5))} / ${round(sorted.at(-1) ?? NaN)}`,
        'usage aggregates run': this.times.length * this.job.settings.usageAliases,
      },
      answers: this.answers.counts, seconds: round(seconds),
    };
  }
}

export function usageAliases(job: AttackJob): HostileAttack {
  return new UsageAliases(job);
}
