import fs from 'node:fs';
import path from 'node:path';
import { deploymentForSuite } from '../support/test-server';
import { metricReferences, variableReferences, type MetricReferences } from './support/metric-references';

const ROOT = path.join(__dirname, '../..');
const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'];

interface DocumentedMetric {
  /** An exact name, or a prefix ending in `*` (prom-client's default process metrics). */
  name: string;
  type: string;
  labels: Set<string>;
}

/** The metrics table of docs/telemetry.md (the README's link for metrics): `| \`name\` | type | labels | what |`, up to the blank line after it. */
function documentedMetrics(): DocumentedMetric[] {
  const text = fs.readFileSync(path.join(ROOT, 'docs/telemetry.md'), 'utf8');
  const start = text.indexOf('| metric | type | labels | what |');
  expect(start).toBeGreaterThanOrEqual(0);
  const table = text.slice(start, text.indexOf('\n\n', start));
  const rows: DocumentedMetric[] = [];
  for (const [, first, type, labels] of table.matchAll(/^\| *(`inference_[^|]*) *\| *([^|]*?) *\| *([^|]*?) *\|/gm)) {
    const names = [...first.matchAll(/`([a-z0-9_*]+)`/g)].map((match) => match[1]);
    for (const name of names) rows.push({ name, type, labels: new Set([...labels.matchAll(/`([a-z_]+)`/g)].map((match) => match[1])) });
  }
  return rows;
}

interface Dashboard {
  templating: { list: Array<{ name: string; type: string; query?: string | { query: string } }> };
  panels: Array<{ id: number; type: string; title: string; datasource?: { uid: string }; targets?: Array<{ expr: string; refId: string }> }>;
}

const dashboard = (): Dashboard => JSON.parse(fs.readFileSync(path.join(ROOT, 'deploy/grafana/inference-platform.json'), 'utf8'));

/**
 * The names an operator reads, kept in agreement: what a running server's /metrics serves (its
 * `# TYPE` lines: every registered metric, sampled or not), the table of docs/telemetry.md, and
 * the queries of the Grafana dashboard in deploy/grafana/. A whole server: real agent, real
 * gRPC, real PostgreSQL, a few requests first so the request series have samples too.
 */
describe('the metrics catalog', () => {
  const served = deploymentForSuite();
  /** Family name → type, from the scrape. */
  const families = new Map<string, string>();
  /** Family name → label names, from the server's registry (prom-client's own label lists and ours). */
  const labelsOf = new Map<string, Set<string>>();
  let scraped = '';

  beforeAll(async () => {
    await served.client.chat.completions.create({ model: served.modelId, messages: [{ role: 'user', content: 'catalog' }], max_tokens: 4 });
    const stream = await served.client.chat.completions.create({ model: served.modelId, messages: [{ role: 'user', content: 'catalog' }], max_tokens: 4, stream: true });
    for await (const chunk of stream) void chunk;
    await fetch(`${served.deployment.baseUrl}/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer sk-not-a-key' }, body: '{}' });
    const response = await fetch(`${served.test.url}/metrics`);
    expect(response.status).toBe(200);
    scraped = await response.text();
    for (const [, name, type] of scraped.matchAll(/^# TYPE (\S+) (\S+)$/gm)) families.set(name, type);
    for (const metric of served.test.server.controlPlane.metrics.registry.getMetricsAsArray() as unknown as Array<{ name: string; labelNames?: readonly string[] }>) {
      labelsOf.set(metric.name, new Set(metric.labelNames ?? []));
    }
  });

  it('has samples of the per-deployment request series after a few requests', () => {
    for (const name of ['inference_requests_total', 'inference_requests_finished_total', 'inference_tokens_total', 'inference_routing_decisions_total',
      'inference_request_e2e_latency_seconds_count', 'inference_request_time_to_first_token_seconds_count', 'inference_request_time_per_output_token_seconds_count',
      'inference_queue_depth', 'inference_replicas', 'inference_budget_held']) {
      expect(scraped).toMatch(new RegExp(`^${name}\\{`, 'm'));
    }
  });

  it('is the table of docs/telemetry.md, both ways, with each metric\'s type and labels', () => {
    const documented = documentedMetrics();
    const exact = documented.filter((row) => !row.name.endsWith('*'));
    const prefixes = documented.filter((row) => row.name.endsWith('*')).map((row) => row.name.slice(0, -1));
    expect(exact.length).toBeGreaterThan(15);
    expect(prefixes).toEqual(['inference_process_', 'inference_nodejs_']);

    const undocumented = [...families.keys()].filter((name) => !exact.some((row) => row.name === name) && !prefixes.some((prefix) => name.startsWith(prefix)));
    expect(undocumented).toEqual([]);
    expect(exact.map((row) => row.name).filter((name) => !families.has(name))).toEqual([]);
    expect(prefixes.filter((prefix) => ![...families.keys()].some((name) => name.startsWith(prefix)))).toEqual([]);
    // Our own metrics are never documented under a default-metrics prefix by accident.
    expect(exact.filter((row) => prefixes.some((prefix) => row.name.startsWith(prefix)))).toEqual([]);

    for (const row of exact) {
      expect({ name: row.name, type: row.type }).toEqual({ name: row.name, type: families.get(row.name) });
      expect({ name: row.name, labels: [...row.labels].sort() }).toEqual({ name: row.name, labels: [...(labelsOf.get(row.name) ?? [])].sort() });
    }
  });

  describe('the Grafana dashboard', () => {
    /** The family a series name of a query belongs to (a histogram's `_bucket`, `_sum`, `_count`). */
    const familyOf = (series: string): string | undefined => {
      if (families.has(series)) return series;
      const suffix = HISTOGRAM_SUFFIXES.find((candidate) => series.endsWith(candidate));
      const base = suffix ? series.slice(0, -suffix.length) : undefined;
      return base && families.get(base) === 'histogram' ? base : undefined;
    };
    const labelsOfSeries = (series: string) => {
      const family = familyOf(series)!;
      const labels = new Set(labelsOf.get(family));
      if (series.endsWith('_bucket')) labels.add('le');
      return labels;
    };
    const queries = () => {
      const board = dashboard();
      const panelQueries = board.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ where: `${panel.title} ${target.refId}`, query: target.expr, variable: false })));
      const variableQueries = board.templating.list.filter((variable) => variable.type === 'query')
        .map((variable) => ({ where: `variable ${variable.name}`, query: typeof variable.query === 'string' ? variable.query : variable.query!.query, variable: true }));
      return [...panelQueries, ...variableQueries];
    };

    it('reads only metrics /metrics serves, and only labels they have', () => {
      const problems: string[] = [];
      const all = queries();
      expect(all.length).toBeGreaterThan(20);
      for (const { where, query, variable } of all) {
        const references: MetricReferences & { valueLabel?: string } = variable ? variableReferences(query) : metricReferences(query);
        expect(references.metrics.size).toBeGreaterThan(0);
        const known = [...references.metrics].filter((series) => {
          if (familyOf(series)) return true;
          problems.push(`${where}: no metric ${series}`);
          return false;
        });
        for (const [series, labels] of references.matchedLabels) {
          if (!series) {
            problems.push(`${where}: a selector without a metric name`);
            continue;
          }
          if (!familyOf(series)) continue;
          for (const label of labels) if (!labelsOfSeries(series).has(label)) problems.push(`${where}: ${series} has no label ${label}`);
        }
        const available = new Set(known.flatMap((series) => [...labelsOfSeries(series)]));
        for (const label of references.groupingLabels) if (!available.has(label)) problems.push(`${where}: groups by ${label}, which none of its metrics has`);
        if (references.valueLabel && !available.has(references.valueLabel)) problems.push(`${where}: no label ${references.valueLabel} to list`);
      }
      expect(problems).toEqual([]);
    });

    it('has the deployment and model variables, and filters every panel by deployment on the chosen data source', () => {
      const board = dashboard();
      expect(board.templating.list.map((variable) => variable.name)).toEqual(['datasource', 'model', 'deployment']);
      const graphs = board.panels.filter((panel) => panel.type !== 'row');
      expect(new Set(board.panels.map((panel) => panel.id)).size).toBe(board.panels.length);
      for (const panel of graphs) {
        expect({ title: panel.title, datasource: panel.datasource?.uid }).toEqual({ title: panel.title, datasource: '${datasource}' });
        expect(panel.targets?.length).toBeGreaterThan(0);
        for (const target of panel.targets!) expect({ title: panel.title, filtered: target.expr.includes('deployment=~"$deployment"') }).toEqual({ title: panel.title, filtered: true });
      }
      // What the issue asks a dashboard to show.
      const used = new Set(graphs.flatMap((panel) => panel.targets!.flatMap((target) => [...metricReferences(target.expr).metrics].map((series) => familyOf(series)))));
      for (const name of ['inference_requests_finished_total', 'inference_request_time_to_first_token_seconds', 'inference_request_time_per_output_token_seconds',
        'inference_request_e2e_latency_seconds', 'inference_tokens_total', 'inference_queue_depth', 'inference_replicas', 'inference_replica_kv_cache_usage_ratio',
        'inference_routing_decisions_total']) expect(used).toContain(name);
    });
  });
});

describe('metricReferences', () => {
  it('finds metrics, matcher labels and grouping labels, and reports an unknown word as a metric', () => {
    const references = metricReferences('histogram_quantile(0.9, sum by (le, deployment) (rate(a_seconds_bucket{deployment=~"$deployment", model="x{y}"}[$__rate_interval]))) / on (deployment) b_total');
    expect([...references.metrics].sort()).toEqual(['a_seconds_bucket', 'b_total']);
    expect(references.matchedLabels.get('a_seconds_bucket')).toEqual(new Set(['deployment', 'model']));
    expect(references.groupingLabels).toEqual(new Set(['le', 'deployment']));
    expect([...metricReferences('made_up_function(x_total[5m])').metrics].sort()).toEqual(['made_up_function', 'x_total']);
    expect(variableReferences('label_values(x_total{model=~"$model"}, deployment)')).toMatchObject({ metrics: new Set(['x_total']), valueLabel: 'deployment' });
  });
});
