import { useId, useMemo, useState } from 'react';
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { useQuery } from 'urql';
import { graphql } from '../gql';
import { Empty, ErrorView, Loading } from '../components/states';
import { formatUsd, sumDecimals } from '../components/format';
import { Money } from '../components/Money';

const REPORT = graphql(`
  query UsageReport($from: DateTimeISO!, $to: DateTimeISO!, $costsBy: String!, $usageBy: String!) {
    costs(from: $from, to: $to, groupBy: $costsBy) { key label gpuHours amount }
    usage(from: $from, to: $to, groupBy: $usageBy) { key label requests promptTokens completionTokens totalTokens }
    deployments { id slug modelId }
  }
`);

const CREDIT = graphql(`
  query CreditAndLedger($from: DateTimeISO!, $to: DateTimeISO!) {
    creditBalance
    ledgerEntries(from: $from, to: $to, limit: 15) {
      kind amount modelId deploymentId deploymentLabel replicaId promptTokens completionTokens pricePerHour periodStart periodEnd createdAt
    }
  }
`);

/** By API key the report has tokens only: GPU time is billed per deployment, whichever keys called it. */
type Grouping = 'day' | 'deployment' | 'api_key' | 'adapter';

const GROUPING_WORDS: Record<Grouping, string> = { day: 'by day', deployment: 'by deployment', api_key: 'by API key', adapter: 'by LoRA adapter' };

const DAY_MS = 86_400_000;
/** The API's range limit (a longer one is BAD_USER_INPUT). */
const MAX_RANGE_DAYS = 366;

/** Colours that keep at least 4.5:1 against the white chart background (text and bars alike). */
const COLOURS = { cost: '#1f4fb8', prompt: '#1f4fb8', completion: '#a34700', axis: '#3d4550', grid: '#d5d9df' };

/** Layout of this page (styles.css is shared; these are this page's own). */
const STYLES = {
  filters: { display: 'flex', flexWrap: 'wrap', alignItems: 'flex-end', gap: '16px', margin: '16px 0' },
  fieldset: { border: 'none', padding: 0, margin: 0 },
  legend: { fontWeight: 600, marginBottom: '4px' },
  inline: { display: 'inline-flex', alignItems: 'center', gap: '4px', fontWeight: 'normal', margin: '0 12px 0 0' },
  card: { background: '#fff', border: '1px solid #dde1e6', borderRadius: '8px', padding: '12px 16px' },
  charts: { display: 'grid', gridTemplateColumns: 'repeat(auto-fit, minmax(320px, 1fr))', gap: '16px', margin: '16px 0' },
  figure: { margin: 0, background: '#fff', border: '1px solid #dde1e6', borderRadius: '8px', padding: '8px' },
  figcaption: { fontWeight: 600, margin: '4px 8px 8px' },
  number: { textAlign: 'right', fontVariantNumeric: 'tabular-nums', whiteSpace: 'nowrap' },
  caption: { textAlign: 'left', fontWeight: 600, padding: '8px 0' },
  scroll: { overflowX: 'auto' },
} satisfies Record<string, React.CSSProperties>;

const KIND_LABELS: Record<string, string> = {
  gpu_time: 'GPU time',
  top_up: 'Top-up',
  guest_debit: 'Shared model call',
  owner_credit: 'Sharing earnings',
  opening_balance: 'Opening balance',
};

function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

function defaultRange(): { from: string; to: string } {
  const today = new Date();
  return { from: isoDay(new Date(today.getTime() - 29 * DAY_MS)), to: isoDay(today) };
}

/** UTC days from..to (both inclusive), as the API groups them. */
function daysBetween(from: string, to: string): string[] {
  const days: string[] = [];
  for (let time = Date.parse(`${from}T00:00:00Z`); time <= Date.parse(`${to}T00:00:00Z`) && days.length <= MAX_RANGE_DAYS; time += DAY_MS) {
    days.push(isoDay(new Date(time)));
  }
  return days;
}

/** "1234567" → "1,234,567". */
function count(value: number): string {
  return value.toLocaleString('en-US');
}

/** Whole cents for the chart's axis and tooltip only (the table keeps the exact amounts). */
function approximateMoney(value: number): string {
  return value < 0.01 && value > 0 ? `$${value.toPrecision(2)}` : `$${value.toFixed(2)}`;
}

interface Row {
  key: string;
  label: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  gpuHours: number;
  amount: string;
}

/** Usage and billing: GPU cost and text tokens by day or deployment, tokens by API key, prepaid credit, and the ledger's latest rows. */
export function Usage() {
  const [range, setRange] = useState(defaultRange);
  const [groupBy, setGroupBy] = useState<Grouping>('day');
  const ids = { from: useId(), to: useId() };

  const rangeProblem = !range.from || !range.to
    ? 'Choose both dates.'
    : range.from > range.to
      ? 'The start date must not be after the end date.'
      : Date.parse(range.to) - Date.parse(range.from) >= MAX_RANGE_DAYS * DAY_MS
        ? `A range may span at most ${MAX_RANGE_DAYS} days.`
        : null;
  const variables = useMemo(() => ({
    from: `${range.from}T00:00:00.000Z`,
    // The end date is inclusive: the query runs to the start of the next UTC day.
    to: rangeProblem ? '' : new Date(Date.parse(`${range.to}T00:00:00Z`) + DAY_MS).toISOString(),
  }), [range, rangeProblem]);

  // GPU time is billed per deployment: by key or by adapter the report counts requests and tokens only.
  const byKey = groupBy === 'api_key' || groupBy === 'adapter';
  const [report, refetchReport] = useQuery({
    query: REPORT, variables: { ...variables, costsBy: byKey ? 'day' : groupBy, usageBy: groupBy }, pause: rangeProblem !== null,
  });
  const [credit, refetchCredit] = useQuery({ query: CREDIT, variables, pause: rangeProblem !== null });
  const refresh = () => {
    refetchReport({ requestPolicy: 'network-only' });
    refetchCredit({ requestPolicy: 'network-only' });
  };

  const rows = useMemo<Row[]>(() => {
    if (!report.data) return [];
    const names = new Map(report.data.deployments.map((deployment) => [deployment.id, `${deployment.modelId} (${deployment.slug})`]));
    const labels = new Map([...report.data.costs, ...report.data.usage].filter((row) => row.label).map((row) => [row.key, row.label as string]));
    // The server names deployments and keys, deleted and revoked ones included; a guest's calls are keyed by the shared model.
    const label = (key: string) => groupBy === 'day' ? key
      : groupBy === 'adapter' && key === '' ? 'Base model (no adapter)'
      : key.startsWith('shared/') ? `${key} (shared model, as a guest)` : labels.get(key) ?? names.get(key) ?? key;
    const rowsByKey = new Map<string, Row>();
    const row = (key: string) => {
      let existing = rowsByKey.get(key);
      if (!existing) {
        existing = { key, label: label(key), requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, gpuHours: 0, amount: '0' };
        rowsByKey.set(key, existing);
      }
      return existing;
    };
    if (!byKey) for (const cost of report.data.costs) Object.assign(row(cost.key), { gpuHours: cost.gpuHours, amount: cost.amount });
    for (const usage of report.data.usage) {
      Object.assign(row(usage.key), {
        requests: usage.requests, promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, totalTokens: usage.totalTokens,
      });
    }
    return [...rowsByKey.values()].sort((a, b) => (groupBy === 'day' ? a.key.localeCompare(b.key) : a.label.localeCompare(b.label)));
  }, [report.data, groupBy, byKey]);

  /** By day the chart shows every day of the range (zero where nothing happened); by deployment, the rows. */
  const chartRows = useMemo(() => {
    const source = groupBy === 'day' && !rangeProblem
      ? daysBetween(range.from, range.to).map((day) => rows.find((row) => row.key === day) ?? { key: day, label: day, amount: '0', promptTokens: 0, completionTokens: 0 })
      : rows;
    return source.map((row) => ({ name: row.label, cost: Number(row.amount), prompt: row.promptTokens, completion: row.completionTokens }));
  }, [rows, groupBy, range, rangeProblem]);

  const totals = rows.reduce((sum, row) => ({
    requests: sum.requests + row.requests, promptTokens: sum.promptTokens + row.promptTokens, completionTokens: sum.completionTokens + row.completionTokens,
    totalTokens: sum.totalTokens + row.totalTokens, gpuHours: sum.gpuHours + row.gpuHours,
  }), { requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, gpuHours: 0 });
  const totalCost = report.data ? sumDecimals(report.data.costs.map((cost) => cost.amount)) : '0';
  const totalGpuHours = report.data ? report.data.costs.reduce((sum, cost) => sum + cost.gpuHours, 0) : 0;
  const period = `${range.from} to ${range.to} (UTC)`;
  const grouping = GROUPING_WORDS[groupBy];

  return (
    <section>
      <header className="page-header">
        <h1>Usage and billing</h1>
        <button type="button" onClick={refresh} disabled={rangeProblem !== null}>Refresh</button>
      </header>

      <section aria-labelledby="credit-heading" style={STYLES.card}>
        <h2 id="credit-heading">Credit</h2>
        {credit.error && <ErrorView error={credit.error} title="The credit balance could not be loaded" />}
        {!credit.data && credit.fetching && <Loading what="the credit balance" />}
        {credit.data && (credit.data.creditBalance === null || credit.data.creditBalance === undefined
          ? <p data-testid="credit-balance"><strong>Postpaid</strong>: this workspace has no prepaid credit and no spending limit; GPU time and shared-model tokens are billed outside the platform.</p>
          : <p data-testid="credit-balance"><strong style={{ fontSize: '1.4em' }}><Money amount={credit.data.creditBalance} /></strong> prepaid credit left. Calls answer 402 once it reaches zero.</p>)}
      </section>

      <form style={STYLES.filters} aria-label="Report range" onSubmit={(event) => event.preventDefault()}>
        <div>
          <label htmlFor={ids.from}>From (UTC)</label>
          <input id={ids.from} type="date" value={range.from} max={range.to || undefined}
            onChange={(event) => setRange((current) => ({ ...current, from: event.target.value }))}
            aria-invalid={rangeProblem !== null} aria-describedby={rangeProblem ? 'range-problem' : undefined} />
        </div>
        <div>
          <label htmlFor={ids.to}>To (UTC, inclusive)</label>
          <input id={ids.to} type="date" value={range.to} min={range.from || undefined}
            onChange={(event) => setRange((current) => ({ ...current, to: event.target.value }))}
            aria-invalid={rangeProblem !== null} aria-describedby={rangeProblem ? 'range-problem' : undefined} />
        </div>
        <fieldset style={STYLES.fieldset}>
          <legend style={STYLES.legend}>Group by</legend>
          <label style={STYLES.inline}><input type="radio" name="group-by" value="day" checked={groupBy === 'day'} onChange={() => setGroupBy('day')} /> Day</label>
          <label style={STYLES.inline}><input type="radio" name="group-by" value="deployment" checked={groupBy === 'deployment'} onChange={() => setGroupBy('deployment')} /> Deployment</label>
          <label style={STYLES.inline}><input type="radio" name="group-by" value="api_key" checked={groupBy === 'api_key'} onChange={() => setGroupBy('api_key')} /> API key</label>
          <label style={STYLES.inline}><input type="radio" name="group-by" value="adapter" checked={groupBy === 'adapter'} onChange={() => setGroupBy('adapter')} /> Adapter</label>
        </fieldset>
        <button type="button" className="link" onClick={() => setRange(defaultRange())}>Last 30 days</button>
      </form>
      {rangeProblem && <p id="range-problem" role="alert" className="field-error">{rangeProblem}</p>}

      <section aria-labelledby="report-heading">
        <h2 id="report-heading">{byKey ? 'Tokens' : 'Cost and tokens'} {grouping}</h2>
        {byKey && <p className="muted">GPU time is billed per deployment, whichever keys and adapters called it: {grouping} the report counts requests and tokens.</p>}
        {report.error && <ErrorView error={report.error} title="Usage could not be loaded" />}
        {!report.data && report.fetching && <Loading what="usage and cost" />}
        {report.data && rows.length === 0 && (
          <Empty>No GPU time or text requests from {period}. Calls to your deployments show up here within seconds.</Empty>
        )}
        {report.data && rows.length > 0 && (
          <>
            <p>
              {period}: <strong><Money amount={totalCost} /></strong> of GPU time ({totalGpuHours.toFixed(3)} GPU-hours),{' '}
              <strong>{count(totals.totalTokens)}</strong> tokens in {count(totals.requests)} text requests.
            </p>
            <div style={STYLES.charts}>
              {!byKey && <figure style={STYLES.figure}>
                <figcaption style={STYLES.figcaption}>GPU cost (USD) {grouping}</figcaption>
                <ResponsiveContainer width="100%" height={240}>
                  <BarChart data={chartRows} accessibilityLayer={false} role="img"
                    title={`Bar chart: GPU cost in USD ${grouping}, ${period}. The same figures are in the table below.`}
                    desc={chartRows.filter((row) => row.cost > 0).map((row) => `${row.name}: ${approximateMoney(row.cost)}`).join('; ') || 'No cost in this range.'}>
                    <CartesianGrid stroke={COLOURS.grid} vertical={false} />
                    <XAxis dataKey="name" stroke={COLOURS.axis} tick={{ fill: COLOURS.axis, fontSize: 12 }} />
                    <YAxis stroke={COLOURS.axis} tick={{ fill: COLOURS.axis, fontSize: 12 }} tickFormatter={approximateMoney} width={70} />
                    <Tooltip formatter={(value) => approximateMoney(Number(value))} />
                    <Bar dataKey="cost" name="GPU cost" fill={COLOURS.cost} isAnimationActive={false} />
                  </BarChart>
                </ResponsiveContainer>
              </figure>}
              <figure style={STYLES.figure}>
                <figcaption style={STYLES.figcaption}>Tokens {grouping}</figcaption>
                <ResponsiveContainer width="100%" height={240}>
                  <BarChart data={chartRows} accessibilityLayer={false} role="img"
                    title={`Stacked bar chart: prompt and completion tokens ${grouping}, ${period}. The same figures are in the table below.`}
                    desc={chartRows.filter((row) => row.prompt + row.completion > 0)
                      .map((row) => `${row.name}: ${count(row.prompt)} prompt, ${count(row.completion)} completion`).join('; ') || 'No tokens in this range.'}>
                    <CartesianGrid stroke={COLOURS.grid} vertical={false} />
                    <XAxis dataKey="name" stroke={COLOURS.axis} tick={{ fill: COLOURS.axis, fontSize: 12 }} />
                    <YAxis stroke={COLOURS.axis} tick={{ fill: COLOURS.axis, fontSize: 12 }} allowDecimals={false} width={70} />
                    <Tooltip />
                    <Legend wrapperStyle={{ color: COLOURS.axis }} />
                    <Bar dataKey="prompt" name="Prompt tokens" stackId="tokens" fill={COLOURS.prompt} isAnimationActive={false} />
                    <Bar dataKey="completion" name="Completion tokens" stackId="tokens" fill={COLOURS.completion} isAnimationActive={false} />
                  </BarChart>
                </ResponsiveContainer>
              </figure>
            </div>
            <div style={STYLES.scroll}>
              <table>
                <caption style={STYLES.caption}>{byKey ? 'Tokens' : 'Cost and tokens'} {grouping}, {period}</caption>
                <thead>
                  <tr>
                    <th scope="col">{groupBy === 'day' ? 'Day' : groupBy === 'adapter' ? 'Adapter' : byKey ? 'API key' : 'Deployment'}</th>
                    <th scope="col" style={STYLES.number}>Requests</th>
                    <th scope="col" style={STYLES.number}>Prompt tokens</th>
                    <th scope="col" style={STYLES.number}>Completion tokens</th>
                    <th scope="col" style={STYLES.number}>Total tokens</th>
                    {!byKey && <th scope="col" style={STYLES.number}>GPU-hours</th>}
                    {!byKey && <th scope="col" style={STYLES.number}>GPU cost</th>}
                  </tr>
                </thead>
                <tbody>
                  {rows.map((row) => (
                    <tr key={row.key}>
                      <th scope="row">{row.label}</th>
                      <td style={STYLES.number}>{count(row.requests)}</td>
                      <td style={STYLES.number}>{count(row.promptTokens)}</td>
                      <td style={STYLES.number}>{count(row.completionTokens)}</td>
                      <td style={STYLES.number}>{count(row.totalTokens)}</td>
                      {!byKey && <td style={STYLES.number}>{row.gpuHours.toFixed(4)}</td>}
                      {!byKey && <td style={STYLES.number}><Money amount={row.amount} /></td>}
                    </tr>
                  ))}
                </tbody>
                <tfoot>
                  <tr>
                    <th scope="row">Total</th>
                    <td style={STYLES.number}>{count(totals.requests)}</td>
                    <td style={STYLES.number}>{count(totals.promptTokens)}</td>
                    <td style={STYLES.number}>{count(totals.completionTokens)}</td>
                    <td style={STYLES.number}>{count(totals.totalTokens)}</td>
                    {!byKey && <td style={STYLES.number}>{totals.gpuHours.toFixed(4)}</td>}
                    {!byKey && <td style={STYLES.number}><Money amount={totalCost} /></td>}
                  </tr>
                </tfoot>
              </table>
            </div>
          </>
        )}
      </section>

      <section aria-labelledby="ledger-heading">
        <h2 id="ledger-heading">Recent ledger entries</h2>
        <p className="muted">Every movement of the workspace's money, newest first (the latest 15 of the range).</p>
        {credit.error && <ErrorView error={credit.error} title="The ledger could not be loaded" />}
        {!credit.data && credit.fetching && <Loading what="ledger entries" />}
        {credit.data && credit.data.ledgerEntries.length === 0 && <Empty>No money moved from {period}.</Empty>}
        {credit.data && credit.data.ledgerEntries.length > 0 && (
          <div style={STYLES.scroll}>
            <table>
              <caption style={STYLES.caption}>Ledger entries, {period}</caption>
              <thead>
                <tr><th scope="col">When (UTC)</th><th scope="col">Kind</th><th scope="col" style={STYLES.number}>Amount</th><th scope="col">Details</th></tr>
              </thead>
              <tbody>
                {credit.data.ledgerEntries.map((entry, index) => (
                  <tr key={`${entry.createdAt}-${index}`}>
                    <td>{formatTime(entry.createdAt)}</td>
                    <td>{KIND_LABELS[entry.kind] ?? entry.kind}</td>
                    <td style={STYLES.number}><Money amount={entry.amount} /></td>
                    <td>{ledgerDetails(entry)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </section>
  );
}

function formatTime(iso: string): string {
  return iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '');
}

function ledgerDetails(entry: {
  kind: string; modelId?: string | null; deploymentId?: string | null; deploymentLabel?: string | null; replicaId?: string | null; promptTokens?: number | null;
  completionTokens?: number | null; pricePerHour?: string | null; periodStart?: string | null; periodEnd?: string | null;
}) {
  const parts: React.ReactNode[] = [];
  if (entry.modelId) parts.push(entry.modelId);
  // The deployment by its model and slug (the id in the title); the replica by its GPU time, its id in the title too.
  if (entry.deploymentId) parts.push(<span key="deployment" title={entry.deploymentId}>{entry.deploymentLabel ?? 'a deleted deployment'}</span>);
  if (entry.promptTokens != null || entry.completionTokens != null) {
    parts.push(`${count(entry.promptTokens ?? 0)} prompt + ${count(entry.completionTokens ?? 0)} completion tokens`);
  }
  if (entry.pricePerHour) parts.push(<span key="price" title={entry.replicaId ? `replica ${entry.replicaId}` : undefined}>one replica at {formatUsd(entry.pricePerHour)}/h</span>);
  if (entry.periodStart && entry.periodEnd) parts.push(`${formatTime(entry.periodStart)} → ${formatTime(entry.periodEnd)}`);
  if (parts.length === 0) return '—';
  return parts.flatMap((part, index) => (index === 0 ? [part] : [', ', part]));
}
