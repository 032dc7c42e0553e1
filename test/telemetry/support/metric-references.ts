/** What a PromQL expression reads: each metric name, and the label names its selectors and groupings use. */
export interface MetricReferences {
  metrics: Set<string>;
  /** Labels named in a selector's matchers, by the metric selected. */
  matchedLabels: Map<string, Set<string>>;
  /** Labels of `by (…)`, `without (…)`, `on (…)`, `ignoring (…)`, `group_left (…)`, `group_right (…)`. */
  groupingLabels: Set<string>;
}

/** PromQL's functions, aggregations and keywords that the dashboard may use: any other bare word is a metric name. */
const NOT_METRICS = new Set([
  'sum', 'avg', 'min', 'max', 'count', 'topk', 'bottomk', 'quantile', 'stddev', 'stdvar', 'group', 'count_values',
  'rate', 'irate', 'increase', 'delta', 'idelta', 'deriv', 'histogram_quantile', 'clamp_min', 'clamp_max', 'abs', 'ceil', 'floor', 'round',
  'avg_over_time', 'max_over_time', 'min_over_time', 'sum_over_time', 'last_over_time', 'vector', 'scalar', 'time', 'label_replace',
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'inf', 'nan',
]);
/** `name{…}` or `{…}`, a quoted value may hold braces. */
const SELECTOR = /([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}/g;
const MATCHER_LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"/g;
const GROUPING = /\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g;

/**
 * Reads an expression the way these tests need, without a full PromQL parser (none is a
 * dependency here): selectors `name{…}` give names and matcher labels; grouping clauses give
 * labels; what remains once strings, ranges (`[5m]`, `[$__rate_interval]`), numbers and
 * PromQL's own words are taken out are bare metric names. A word it does not know is reported
 * as a metric, so an unknown function fails a test rather than passing unseen.
 */
export function metricReferences(expression: string): MetricReferences {
  const metrics = new Set<string>();
  const matchedLabels = new Map<string, Set<string>>();
  const groupingLabels = new Set<string>();
  for (const [, labels] of expression.matchAll(GROUPING)) {
    for (const label of labels.split(',').map((name) => name.trim()).filter(Boolean)) groupingLabels.add(label);
  }
  let rest = expression.replace(GROUPING, ' ');
  rest = rest.replace(SELECTOR, (_whole, name: string | undefined, matchers: string) => {
    const key = name ?? '';
    if (name) metrics.add(name);
    const labels = matchedLabels.get(key) ?? new Set<string>();
    for (const [, label] of matchers.matchAll(MATCHER_LABEL)) labels.add(label);
    matchedLabels.set(key, labels);
    return ' ';
  });
  rest = rest.replace(/"(?:[^"\\]|\\.)*"/g, ' ').replace(/\[[^\]]*\]/g, ' ');
  for (const [word] of rest.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (!NOT_METRICS.has(word.toLowerCase())) metrics.add(word);
  }
  return { metrics, matchedLabels, groupingLabels };
}

/**
 * A Grafana variable query's references: `label_values(metric{…}, label)` reads `metric`
 * and names `label` (a label, not a metric); other queries are PromQL.
 */
export function variableReferences(query: string): MetricReferences & { valueLabel?: string } {
  const labelValues = /^\s*label_values\(\s*(?:(.+?)\s*,\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$/.exec(query);
  if (!labelValues) return metricReferences(query);
  const references = labelValues[1] ? metricReferences(labelValues[1]) : { metrics: new Set<string>(), matchedLabels: new Map(), groupingLabels: new Set<string>() };
  return { ...references, valueLabel: labelValues[2] };
}
