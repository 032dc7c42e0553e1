import { useQuery } from 'urql';
import { CartesianGrid, Legend, Line, LineChart, Tooltip, XAxis, YAxis } from 'recharts';
import { graphql } from '../gql';
import type { AutoscalingHistoryQuery } from '../gql/graphql';
import { Money } from './Money';
import { Empty, ErrorView, Loading } from './states';
import { formatUsd } from './format';
import { Chart } from './HistoryCharts';
import { labelOf, stepWords, useHistoryWindow, type RangeKey } from './history-range';

// Asked of one deployment only: each point reads the rollups and the decisions of its range.
const AUTOSCALING_HISTORY = graphql(`
  query AutoscalingHistory($id: ID!, $from: DateTimeISO!, $to: DateTimeISO!, $step: Int!) {
    deployment(id: $id) {
      id
      autoscalingHistory(from: $from, to: $to, stepMinutes: $step) {
        at requests sloRequests withinSlo attainment arrivalsPerSecond forecastArrivalsPerSecond replicas gpuCost fixedMaxCost
      }
    }
  }
`);

type Point = AutoscalingHistoryQuery['deployment']['autoscalingHistory'][number];

const AXIS = { fill: '#3d4450' };
const DOT = { r: 2 };

/**
 * SLO attainment over time, the autoscaler's forecast beside the arrivals it forecast, and the
 * GPU cost billed against what fixed-max would have cost (GraphQL `autoscalingHistory`,
 * docs/scaling-settings.md#history-slo-attainment-forecast-and-cost), over the page's range.
 */
export function AutoscalingHistory({ deploymentId, rangeKey, hasSlo, maxReplicas }: { deploymentId: string; rangeKey: RangeKey; hasSlo: boolean; maxReplicas: number }) {
  const { range, from, to } = useHistoryWindow(rangeKey);
  const [{ data, fetching, error }] = useQuery({
    query: AUTOSCALING_HISTORY, variables: { id: deploymentId, from, to, step: range.step }, requestPolicy: 'cache-and-network',
  });
  if (error) return <ErrorView error={error} title="The autoscaling history could not be read" />;
  if (!data) return fetching ? <Loading what="the autoscaling history" /> : null;

  const history = data.deployment.autoscalingHistory;
  const sum = (pick: (point: Point) => number) => history.reduce((total, point) => total + pick(point), 0);
  const judged = sum((point) => point.sloRequests);
  const within = sum((point) => point.withinSlo);
  const billed = sum((point) => point.gpuCost);
  const fixedMax = sum((point) => point.fixedMaxCost);
  const forecasts = history.some((point) => point.forecastArrivalsPerSecond !== null);
  const peak = Math.max(0, ...history.map((point) => point.arrivalsPerSecond));
  // Running totals: the two costs diverge over the range where the autoscaler saved.
  let billedSoFar = 0;
  let fixedSoFar = 0;
  const points = history.map((point) => {
    billedSoFar += point.gpuCost;
    fixedSoFar += point.fixedMaxCost;
    return {
      time: labelOf(point.at, range.minutes),
      attainment: point.attainment === null ? null : point.attainment * 100,
      arrivals: point.arrivalsPerSecond, forecast: point.forecastArrivalsPerSecond,
      billed: billedSoFar, fixedMax: fixedSoFar,
    };
  });
  if (judged === 0 && peak === 0 && billed === 0 && fixedMax === 0) {
    return <Empty>Nothing ran in the last {range.label}: attainment, arrivals and cost fill in minute by minute.</Empty>;
  }
  const step = stepWords(range.step);

  return (
    <div style={{ display: 'grid', gridTemplateColumns: 'repeat(auto-fit, minmax(420px, 1fr))', gap: 12 }}>
      <Chart title="SLO attainment" testId="autoscaling-attainment" caption={!hasSlo && judged === 0
        ? 'No SLO stated: requests are not judged. State one below to see how the autoscaler meets it.'
        : judged === 0
          ? `No request was judged against the SLO in the last ${range.label}.`
          : `${percent(within / judged)} of ${judged} requests within the SLO in the last ${range.label} (per ${step}: the share within it)`}>
        <LineChart data={points} accessibilityLayer={false}>
          <CartesianGrid stroke="#e5e8ec" />
          <XAxis dataKey="time" minTickGap={40} tick={AXIS} />
          <YAxis unit=" %" domain={[0, 100]} tick={AXIS} />
          <Tooltip formatter={(value) => `${Number(value).toFixed(1)} %`} />
          <Line type="monotone" dataKey="attainment" name="Within the SLO" stroke="#2e7d32" connectNulls dot={DOT} isAnimationActive={false} />
        </LineChart>
      </Chart>
      <Chart title="Arrivals and forecast" testId="autoscaling-forecast" caption={forecasts
        ? `Peak ${rate(peak)} req/s arrived; the dashed line is what the autoscaler forecast a start-up ahead (per ${step})`
        : `Peak ${rate(peak)} req/s arrived; the concurrency policy does not forecast`}>
        <LineChart data={points} accessibilityLayer={false}>
          <CartesianGrid stroke="#e5e8ec" />
          <XAxis dataKey="time" minTickGap={40} tick={AXIS} />
          <YAxis tick={AXIS} tickFormatter={(value: number) => rate(value)} />
          <Tooltip formatter={(value) => `${rate(Number(value))} req/s`} />
          <Legend />
          <Line type="monotone" dataKey="arrivals" name="Arrived (req/s)" stroke="#1f5fbf" dot={false} isAnimationActive={false} />
          <Line type="monotone" dataKey="forecast" name="Forecast (req/s)" stroke="#b04a00" strokeDasharray="5 3" connectNulls dot={false} isAnimationActive={false} />
        </LineChart>
      </Chart>
      <Chart title="Cost against fixed-max" testId="autoscaling-cost" caption={
        <><Money amount={billed} /> billed against <Money amount={fixedMax} /> had {maxReplicas} replica{maxReplicas === 1 ? '' : 's'} run throughout the last {range.label}
          {fixedMax > 0 ? ` (${percent(billed / fixedMax)} of it)` : ''}</>}>
        <LineChart data={points} accessibilityLayer={false}>
          <CartesianGrid stroke="#e5e8ec" />
          <XAxis dataKey="time" minTickGap={40} tick={AXIS} />
          <YAxis tick={AXIS} width={76} tickFormatter={(value: number) => formatUsd(value)} />
          <Tooltip formatter={(value) => `$${Number(value).toFixed(4)}`} />
          <Legend />
          <Line type="stepAfter" dataKey="billed" name="Billed (so far)" stroke="#b04a00" dot={false} isAnimationActive={false} />
          <Line type="stepAfter" dataKey="fixedMax" name="Fixed at max (so far)" stroke="#6b3fa0" strokeDasharray="5 3" dot={false} isAnimationActive={false} />
        </LineChart>
      </Chart>
    </div>
  );
}

/** Floored to a tenth, so a share short of all never reads "100.0 %". */
function percent(share: number): string {
  return `${(Math.floor(share * 1_000) / 10).toFixed(1)} %`;
}

function rate(perSecond: number): string {
  return perSecond >= 10 ? perSecond.toFixed(1) : perSecond.toFixed(2);
}
