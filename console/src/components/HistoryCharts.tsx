import { useQuery } from 'urql';
import { Bar, BarChart, CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { graphql } from '../gql';
import type { DeploymentHistoryQuery } from '../gql/graphql';
import { Empty, ErrorView, Loading } from './states';
import { formatUsd } from './format';
import { labelOf, RangeButtons, stepWords, useHistoryWindow, type RangeKey } from './history-range';

const HISTORY = graphql(`
  query DeploymentHistory($id: ID!, $from: DateTimeISO!, $to: DateTimeISO!, $step: Int!) {
    deploymentMetrics(deploymentId: $id, from: $from, to: $to, stepMinutes: $step) {
      at requests errors tokensIn tokensOut ttftP50 ttftP95 ttftP99 latencyP50 latencyP95 latencyP99 replicas gpuCostUsd
    }
  }
`);

type Point = DeploymentHistoryQuery['deploymentMetrics'][number];

const AXIS = { fill: '#3d4450' };
/** Percentiles exist only in steps that served requests: a dot shows a lone one, which a line alone would not draw. */
const DOT = { r: 2 };

/**
 * A deployment's history from the server's per-minute rollups (GraphQL `deploymentMetrics`):
 * requests and errors, tokens, TTFT and latency percentiles, replicas and GPU cost, over the
 * last hour, day or week. Unlike the live load chart it does not start when the page opens.
 */
export function HistoryCharts({ deploymentId, rangeKey, onRange }: { deploymentId: string; rangeKey: RangeKey; onRange: (key: RangeKey) => void }) {
  const { range, from, to } = useHistoryWindow(rangeKey);
  const [{ data, fetching, error }] = useQuery({
    query: HISTORY, variables: { id: deploymentId, from, to, step: range.step }, requestPolicy: 'cache-and-network',
  });
  const points = (data?.deploymentMetrics ?? []).map((point) => ({ ...point, time: labelOf(point.at, range.minutes) }));

  return (
    <div data-testid="history-charts">
      <RangeButtons value={rangeKey} onChange={onRange} />
      {error && <ErrorView error={error} title="The history could not be read" />}
      {!data && fetching && <Loading what="the history" />}
      {data && <Charts points={points} stepMinutes={range.step} rangeLabel={range.label} />}
    </div>
  );
}

function Charts({ points, stepMinutes, rangeLabel }: { points: Array<Point & { time: string }>; stepMinutes: number; rangeLabel: string }) {
  const total = (field: 'requests' | 'errors' | 'tokensIn' | 'tokensOut' | 'gpuCostUsd') => points.reduce((sum, point) => sum + point[field], 0);
  const requests = total('requests');
  const cost = total('gpuCostUsd');
  const peakReplicas = Math.max(0, ...points.map((point) => point.replicas));
  const worst = (field: 'latencyP95' | 'ttftP95') => Math.max(0, ...points.map((point) => point[field] ?? 0));
  if (requests === 0 && peakReplicas === 0 && cost === 0) {
    return <Empty>Nothing ran in the last {rangeLabel}: the history fills in minute by minute once requests are served.</Empty>;
  }
  const step = stepWords(stepMinutes);
  return (
    <div style={{ display: 'grid', gridTemplateColumns: 'repeat(auto-fit, minmax(420px, 1fr))', gap: 12 }}>
      <Chart title="Requests and errors" caption={`${requests} requests, ${total('errors')} errors in the last ${rangeLabel} (per ${step})`} testId="history-requests">
        <BarChart data={points} accessibilityLayer={false}>
          <CartesianGrid stroke="#e5e8ec" />
          <XAxis dataKey="time" minTickGap={40} tick={AXIS} />
          <YAxis allowDecimals={false} tick={AXIS} />
          <Tooltip />
          <Legend />
          <Bar dataKey="requests" name="Requests" fill="#1f5fbf" isAnimationActive={false} />
          <Bar dataKey="errors" name="Errors" fill="#b00020" isAnimationActive={false} />
        </BarChart>
      </Chart>
      <Chart title="Tokens" caption={`${total('tokensIn')} in, ${total('tokensOut')} out`} testId="history-tokens">
        <LineChart data={points} accessibilityLayer={false}>
          <CartesianGrid stroke="#e5e8ec" />
          <XAxis dataKey="time" minTickGap={40} tick={AXIS} />
          <YAxis allowDecimals={false} tick={AXIS} />
          <Tooltip />
          <Legend />
          <Line type="monotone" dataKey="tokensIn" name="In (prompt)" stroke="#1f5fbf" dot={false} isAnimationActive={false} />
          <Line type="monotone" dataKey="tokensOut" name="Out (completion)" stroke="#6b3fa0" dot={false} isAnimationActive={false} />
        </LineChart>
      </Chart>
      <PercentileChart title="Time to first token" caption={`Streamed requests; worst p95 ${formatMs(worst('ttftP95'))}`} points={points} prefix="ttft" testId="history-ttft" />
      <PercentileChart title="Latency" caption={`End to end; worst p95 ${formatMs(worst('latencyP95'))}`} points={points} prefix="latency" testId="history-latency" />
      <Chart title="Replicas" caption={`At most ${peakReplicas} running`} testId="history-replicas">
        <LineChart data={points} accessibilityLayer={false}>
          <CartesianGrid stroke="#e5e8ec" />
          <XAxis dataKey="time" minTickGap={40} tick={AXIS} />
          <YAxis allowDecimals={false} tick={AXIS} />
          <Tooltip />
          <Line type="stepAfter" dataKey="replicas" name="Replicas" stroke="#2e7d32" dot={false} isAnimationActive={false} />
        </LineChart>
      </Chart>
      <Chart title="GPU cost" caption={`${formatUsd(cost)} billed in the last ${rangeLabel}`} testId="history-cost">
        <BarChart data={points} accessibilityLayer={false}>
          <CartesianGrid stroke="#e5e8ec" />
          <XAxis dataKey="time" minTickGap={40} tick={AXIS} />
          <YAxis tick={AXIS} width={76} tickFormatter={(value: number) => formatUsd(value)} />
          <Tooltip formatter={(value) => `$${Number(value).toFixed(4)}`} />
          <Bar dataKey="gpuCostUsd" name="GPU cost" fill="#b04a00" isAnimationActive={false} />
        </BarChart>
      </Chart>
    </div>
  );
}

function PercentileChart({ title, caption, points, prefix, testId }: {
  title: string; caption: string; points: Array<Point & { time: string }>; prefix: 'ttft' | 'latency'; testId: string;
}) {
  return (
    <Chart title={title} caption={caption} testId={testId}>
      <LineChart data={points} accessibilityLayer={false}>
        <CartesianGrid stroke="#e5e8ec" />
        <XAxis dataKey="time" minTickGap={40} tick={AXIS} />
        <YAxis unit=" ms" tick={AXIS} />
        <Tooltip formatter={(value) => formatMs(Number(value))} />
        <Legend />
        <Line type="monotone" dataKey={`${prefix}P50`} name="p50" stroke="#1f5fbf" connectNulls dot={DOT} isAnimationActive={false} />
        <Line type="monotone" dataKey={`${prefix}P95`} name="p95" stroke="#b04a00" connectNulls dot={DOT} isAnimationActive={false} />
        <Line type="monotone" dataKey={`${prefix}P99`} name="p99" stroke="#b00020" connectNulls dot={DOT} isAnimationActive={false} />
      </LineChart>
    </Chart>
  );
}

/** One titled chart with its caption (the charts themselves are hidden from screen readers; the caption says it). */
export function Chart({ title, caption, testId, children }: { title: string; caption: React.ReactNode; testId: string; children: React.ReactElement }) {
  return (
    <figure style={{ margin: 0, background: '#fff', padding: 12, borderRadius: 8 }} data-testid={testId}>
      <h3 style={{ marginTop: 0 }}>{title}</h3>
      <div aria-hidden="true" style={{ width: '100%', height: 200 }}>
        <ResponsiveContainer width="100%" height="100%">{children}</ResponsiveContainer>
      </div>
      <figcaption>{caption}</figcaption>
    </figure>
  );
}

function formatMs(ms: number | null): string {
  if (ms === null || ms === 0) return '—';
  return ms >= 1_000 ? `${(ms / 1_000).toFixed(2)} s` : `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
}
