import { useEffect, useRef, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router-dom';
import { useMutation, useQuery, useSubscription } from 'urql';
import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { graphql } from '../gql';
import { TableScroll } from '../components/TableScroll';
import type { DeploymentDetailQuery } from '../gql/graphql';
import { ConfirmButton } from '../components/ConfirmButton';
import { CopyButton } from '../components/CopyButton';
import { Empty, ErrorView, Loading } from '../components/states';
import { HistoryCharts } from '../components/HistoryCharts';
import { AutoscalingSection } from '../components/AutoscalingSection';
import { sloTargetsOf } from '../components/AutoscalingFields';
import { ColdStartStatus } from '../components/ColdStartStatus';
import type { RangeKey } from '../components/history-range';
import { Money } from '../components/Money';
import { ReplicaLogs } from '../components/ReplicaLogs';
import { DeploymentAdapters } from '../components/DeploymentAdapters';
import { StartupPhases } from '../components/StartupPhases';
import { snippetsFor, type SnippetModel } from '../components/snippets';

const DEPLOYMENT = graphql(`
  query DeploymentDetail($id: ID!) {
    deployment(id: $id) {
      id modelId slug baseUrl status statusReason priceCapPerHour minReplicas maxReplicas autoscale desiredReplicas
      provider progress shareIdleCapacity sharing storageCredentialId maxLoras maxCpuLoras maxLoraRank replicaStartFailures createdAt updatedAt
      scalingPolicy slo { ttftP95Ms tpotP95Ms queueWaitP95Ms } scaleToZeroAfterSeconds coldStartQueueLimit waitingForReplica
      replicas { id status statusReason provider gpuName gpuMemoryGb region pricePerHour loadPercent engineKind startedAt terminatedAt startupMs startFailure startupPhases { name durationMs done detail } }
      scalingDecisions(limit: 20) {
        decidedAt action reason explanation signal targetConcurrency currentReplicas wantedReplicas desiredReplicas policy movedBy forecastArrivalsPerSecond arrivalsPerSecond
      }
    }
    catalog { id name task modality sizes videoSpec { durationSeconds fps } }
    sharedModels { modelId }
  }
`);

const DEPLOYMENT_UPDATED = graphql(`
  subscription DeploymentUpdated {
    deploymentUpdated {
      id modelId slug baseUrl status statusReason priceCapPerHour minReplicas maxReplicas autoscale desiredReplicas
      provider progress shareIdleCapacity sharing storageCredentialId maxLoras maxCpuLoras maxLoraRank replicaStartFailures createdAt updatedAt
      scalingPolicy slo { ttftP95Ms tpotP95Ms queueWaitP95Ms } scaleToZeroAfterSeconds coldStartQueueLimit waitingForReplica
      replicas { id status statusReason provider gpuName gpuMemoryGb region pricePerHour loadPercent engineKind startedAt terminatedAt startupMs startFailure startupPhases { name durationMs done detail } }
    }
  }
`);

const REPLICA_LOAD = graphql(`
  subscription ReplicaLoad($deploymentId: ID!) {
    replicaLoad(deploymentId: $deploymentId) { replicaId inFlight queued engineHealth at firstOutputMs completionMs completed }
  }
`);

const COSTS = graphql(`
  query DeploymentCosts($from: DateTimeISO!, $to: DateTimeISO!) {
    costs(from: $from, to: $to, groupBy: "deployment") { key gpuHours amount }
  }
`);

const PAUSE = graphql(`mutation PauseDeployment($id: ID!) { pauseDeployment(id: $id) { id status statusReason } }`);
const RESUME = graphql(`mutation ResumeDeployment($id: ID!) { resumeDeployment(id: $id) { id status statusReason } }`);
const DELETE = graphql(`mutation DeleteDeployment($id: ID!) { deleteDeployment(id: $id) { id status } }`);
const SET_SHARING = graphql(`
  mutation SetSharing($id: ID!, $share: Boolean!) {
    updateDeployment(id: $id, input: { shareIdleCapacity: $share }) { id shareIdleCapacity sharing }
  }
`);

type Deployment = DeploymentDetailQuery['deployment'];
type LivePart = Omit<Deployment, 'scalingDecisions'>;
/** Load summed over replicas; latency as the reporting replica measured it since its previous report (null: no job then). */
interface LoadPoint { time: string; inFlight: number; queued: number; firstOutputMs: number | null; completionMs: number | null }
interface ReplicaReport { inFlight: number; queued: number; engineHealth: string }

/** Re-read after any mutation of a deployment; module-level, so urql sees one stable context. */
const DEPLOYMENT_CONTEXT = { additionalTypenames: ['Deployment'] };

/** Points of the load chart kept in memory: about ten minutes of 1–5 s heartbeats. */
const MAX_POINTS = 300;

export function DeploymentDetail() {
  const { id = '' } = useParams();
  const navigate = useNavigate();
  const [{ data, fetching, error }, refetch] = useQuery({ query: DEPLOYMENT, variables: { id }, context: DEPLOYMENT_CONTEXT });
  const [live, setLive] = useState<LivePart | null>(null);
  const [logReplica, setLogReplica] = useState<string | null>(null);
  // One range for the History and Autoscaling charts.
  const [rangeKey, setRangeKey] = useState<RangeKey>('1h');
  const [updates] = useSubscription({ query: DEPLOYMENT_UPDATED }, (_previous: unknown, event) => {
    if (event.deploymentUpdated.id === id) setLive(event.deploymentUpdated);
    return event;
  });

  // Latest report of each replica, summed into one point per report: the deployment's load then.
  const [points, setPoints] = useState<LoadPoint[]>([]);
  const latest = useRef<Record<string, ReplicaReport>>({});
  const [load] = useSubscription({ query: REPLICA_LOAD, variables: { deploymentId: id } }, (_previous: unknown, event) => {
    const report = event.replicaLoad;
    latest.current = { ...latest.current, [report.replicaId]: { inFlight: report.inFlight, queued: report.queued, engineHealth: report.engineHealth } };
    const totals = Object.values(latest.current).reduce((sum, item) => ({ inFlight: sum.inFlight + item.inFlight, queued: sum.queued + item.queued }), { inFlight: 0, queued: 0 });
    setPoints((previous) => [...previous, {
      time: new Date(report.at).toLocaleTimeString(), ...totals, firstOutputMs: report.firstOutputMs ?? null, completionMs: report.completionMs ?? null,
    }].slice(-MAX_POINTS));
    return event;
  });

  // Another deployment's page reuses this component: its chart starts empty.
  useEffect(() => {
    latest.current = {};
    setPoints([]);
    setLive(null);
  }, [id]);

  const queried = data?.deployment;
  // The subscription's copy wins once it is newer; replicas and decisions re-read on a timer fill the rest.
  const deployment: Deployment | undefined = queried && live && live.id === queried.id && live.updatedAt > queried.updatedAt
    ? { ...queried, ...live }
    : queried;

  // Load progress and replica rows move without a deployment change (heartbeats): re-read them, often while Creating.
  const creating = deployment?.status === 'Creating';
  useEffect(() => {
    if (!queried) return;
    const timer = setInterval(() => refetch({ requestPolicy: 'network-only' }), creating ? 1_500 : 10_000);
    return () => clearInterval(timer);
  }, [queried?.id, creating, refetch]);
  useEffect(() => {
    if (live && queried && live.updatedAt > queried.updatedAt) refetch({ requestPolicy: 'network-only' });
  }, [live?.updatedAt]);

  const [paused, pause] = useMutation(PAUSE);
  const [resumed, resume] = useMutation(RESUME);
  const [deleted, remove] = useMutation(DELETE);
  const [sharingChange, setSharing] = useMutation(SET_SHARING);
  const actionError = paused.error ?? resumed.error ?? deleted.error ?? sharingChange.error;

  if (error) return <section><h1>Deployment</h1><ErrorView error={error} title="The deployment could not be read" /><p><Link to="/deployments">Back to deployments</Link></p></section>;
  if (!deployment) return <section><h1>Deployment</h1>{fetching && <Loading what="the deployment" />}</section>;

  const model = data?.catalog.find((item) => item.id === deployment.modelId);
  const shareable = Boolean(data?.sharedModels.some((item) => item.modelId === deployment.modelId)) && deployment.provider !== 'external';
  const editable = ['Creating', 'Running', 'Paused'].includes(deployment.status);
  const busy = paused.fetching || resumed.fetching || deleted.fetching || sharingChange.fetching;
  const context = { additionalTypenames: ['Deployment'] };

  return (
    <section>
      <p><Link to="/deployments">← Deployments</Link></p>
      <header className="page-header">
        <h1>{model?.name ?? deployment.modelId}</h1>
        <span style={{ display: 'flex', gap: 8, alignItems: 'center' }}>
          <span className={`status status-${deployment.status.toLowerCase()}`} role="status" aria-label={`Status: ${deployment.status}`}>{deployment.status}</span>
          <SharingBadge sharing={deployment.sharing} />
        </span>
      </header>
      <p className="muted"><code>{deployment.modelId}</code> · <code>{deployment.slug}</code>{deployment.statusReason ? ` · ${deployment.statusReason}` : ''}</p>
      {deployment.replicas.some((replica) => replica.engineKind === 'cpu' && !replica.terminatedAt) && (
        <p className="notice" role="note">
          Served by the built-in CPU stand-in: it has no model weights and answers with placeholder words, not {deployment.modelId}&apos;s.
          For real answers on a CPU, start the server with <code>LOCAL_MODEL_PATH=/path/to/model.gguf</code> (README: &quot;Real inference on CPU with llama.cpp&quot;).
        </p>
      )}
      {creating && (
        <p>
          <label htmlFor="load-progress" style={{ display: 'inline', marginRight: 8 }}>Loading the model</label>
          <progress id="load-progress" max={100} value={deployment.progress ?? undefined}>{deployment.progress ?? 0}%</progress>
          {' '}{deployment.progress === null ? 'placing replicas…' : `${deployment.progress}%`}
        </p>
      )}
      <ColdStartStatus deploymentId={deployment.id} status={deployment.status} scalesToZero={deployment.scaleToZeroAfterSeconds != null}
        running={deployment.replicas.some((replica) => replica.status === 'Running')} desiredReplicas={deployment.desiredReplicas} waiting={deployment.waitingForReplica} />
      {(updates.error || load.error) && <ErrorView error={(updates.error ?? load.error)!} title="Live updates stopped; reload the page to resume them" />}

      <h2>Actions</h2>
      <div style={{ display: 'flex', gap: 12, flexWrap: 'wrap', alignItems: 'center' }}>
        {deployment.status === 'Paused'
          ? <ConfirmButton label="Resume" question="Place replicas again? Billing starts once they run." disabled={busy} onConfirm={() => void resume({ id }, context)} />
          : <ConfirmButton label="Pause" question="Pause this deployment? The endpoint answers 503 and billing stops." disabled={busy || !['Creating', 'Running'].includes(deployment.status)} onConfirm={() => void pause({ id }, context)} />}
        <ConfirmButton label="Delete" question="Delete this deployment? Its endpoint answers 404 from now on." disabled={busy}
          onConfirm={() => void remove({ id }, context).then((result) => { if (result.data) navigate('/deployments'); })} />
        {shareable && editable && (deployment.shareIdleCapacity
          ? <ConfirmButton label="Stop sharing" question="Stop admitting guests? Running guest requests finish." disabled={busy} onConfirm={() => void setSharing({ id, share: false }, context)} />
          : <ConfirmButton label="Share idle capacity" question="Replicas restart one at a time to turn on priority scheduling; with one replica the endpoint answers 503 for up to a few minutes. Share?" disabled={busy} onConfirm={() => void setSharing({ id, share: true }, context)} />)}
      </div>
      {actionError && <ErrorView error={actionError} title="The change was not made" />}

      <h2>Endpoint</h2>
      <Endpoint baseUrl={deployment.baseUrl} model={model ?? { id: deployment.modelId, task: 'chat', sizes: [] }} />
      {model && ['chat', 'image-generation'].includes(model.task) && (
        <p><Link to={`/playground?deployment=${encodeURIComponent(deployment.id)}`}>Try it in the playground</Link></p>
      )}
      {(model?.modality ?? 'text') === 'text' && (
        <p><Link to={`/batches?deployment=${encodeURIComponent(deployment.id)}`}>Batches on this deployment</Link> <span className="muted">(the OpenAI Batch API at this base URL)</span></p>
      )}

      <h2>Settings</h2>
      <TableScroll><table>
        <tbody>
          <tr><th scope="row">Price cap</th><td><Money amount={deployment.priceCapPerHour} /> per replica-hour</td></tr>
          <tr><th scope="row">Replicas</th><td>{deployment.minReplicas} to {deployment.maxReplicas}; desired now {deployment.desiredReplicas}</td></tr>
          <tr><th scope="row">Autoscale</th><td>{deployment.autoscale ? 'On: scales by load within the range' : 'Off: pinned at the minimum'}</td></tr>
          <tr><th scope="row">Provider</th><td>{deployment.provider}</td></tr>
          {model && model.modality !== 'text' && <tr><th scope="row">Output storage</th><td>{deployment.storageCredentialId === null ? 'Managed' : `Storage credential ${deployment.storageCredentialId}`}</td></tr>}
          <tr><th scope="row">Share idle capacity</th><td>{shareable ? (deployment.shareIdleCapacity ? 'On' : 'Off') : 'Not available for this model'}</td></tr>
          <tr><th scope="row">Created</th><td>{new Date(deployment.createdAt).toLocaleString()}</td></tr>
        </tbody>
      </table></TableScroll>

      {model && ['chat', 'completion'].includes(model.task) && (
        <>
          <h2>LoRA adapters</h2>
          <DeploymentAdapters deploymentId={deployment.id} editable={editable}
            settings={{ maxLoras: deployment.maxLoras, maxCpuLoras: deployment.maxCpuLoras, maxLoraRank: deployment.maxLoraRank }} />
        </>
      )}

      <h2>Cost so far</h2>
      <CostSoFar deploymentId={deployment.id} since={deployment.createdAt} />

      <h2>Replicas</h2>
      {deployment.replicaStartFailures > 0 && (
        <p className="notice" role="note" data-testid="start-failures">
          {deployment.replicaStartFailures === 1 ? '1 replica' : `${deployment.replicaStartFailures} replicas`} never became ready and {deployment.replicaStartFailures === 1 ? 'was' : 'were'} replaced;
          each failure in a row doubles the wait before the next try (the status above says when). Show the terminated replicas for where each one stuck.
        </p>
      )}
      <Replicas replicas={deployment.replicas} onShowLogs={(replicaId) => {
        setLogReplica(replicaId);
        document.getElementById('replica-logs-heading')?.scrollIntoView();
      }} />

      <h2 id="replica-logs-heading">Replica logs</h2>
      <ReplicaLogs deploymentId={deployment.id} replicas={deployment.replicas} replicaId={logReplica} onReplica={setLogReplica} />

      <h2>Autoscaling</h2>
      <AutoscalingSection deployment={deployment} targets={sloTargetsOf(model ?? { modality: 'text', task: 'chat' })} editable={editable}
        rangeKey={rangeKey} onRange={setRangeKey} />

      <h2>History</h2>
      <HistoryCharts deploymentId={deployment.id} rangeKey={rangeKey} onRange={setRangeKey} />

      <h2>Load and latency over time</h2>
      <LoadChart points={points} latest={latest.current} />

      <h2>Scaling decisions</h2>
      <ScalingDecisions decisions={data?.deployment.scalingDecisions ?? []} />
    </section>
  );
}

function SharingBadge({ sharing }: { sharing: string }) {
  if (sharing === 'activating') return <span className="badge" role="status">Sharing: Activating...</span>;
  if (sharing === 'shared') return <span className="badge" role="status" style={{ background: '#dff5e3' }}>Shared</span>;
  return null;
}

function Endpoint({ baseUrl, model }: { baseUrl: string; model: SnippetModel }) {
  const { curl, sdk, after } = snippetsFor(baseUrl, model);
  return (
    <>
      <p style={{ display: 'flex', gap: 8, alignItems: 'center', flexWrap: 'wrap' }}>
        <span>Base URL</span> <code data-testid="base-url">{baseUrl}</code> <CopyButton text={baseUrl} label="Copy base URL" />
      </p>
      <h3>curl</h3>
      <pre aria-label="curl example" tabIndex={0}>{curl}</pre>
      <CopyButton text={curl} label="Copy curl command" />
      {after && <p className="muted">{after}</p>}
      <h3>OpenAI SDK (Python)</h3>
      <pre aria-label="OpenAI SDK example" tabIndex={0}>{sdk}</pre>
      <CopyButton text={sdk} label="Copy SDK example" />
      <p className="muted">Set <code>API_KEY</code> to a workspace key (API keys page).</p>
    </>
  );
}

function CostSoFar({ deploymentId, since }: { deploymentId: string; since: string }) {
  // `to` moves on every minute so the cost keeps up without a query per render.
  const [now, setNow] = useState(() => new Date());
  useEffect(() => {
    const timer = setInterval(() => setNow(new Date()), 60_000);
    return () => clearInterval(timer);
  }, []);
  const [{ data, fetching, error }] = useQuery({ query: COSTS, variables: { from: since, to: now.toISOString() } });
  if (error) return <ErrorView error={error} title="Costs could not be read" />;
  if (!data) return fetching ? <Loading what="costs" /> : null;
  const row = data.costs.find((item) => item.key === deploymentId);
  if (!row) return <Empty>No GPU time billed yet.</Empty>;
  return <p data-testid="cost-so-far"><strong><Money amount={row.amount} /></strong> for {row.gpuHours.toFixed(3)} GPU-hours since it was created.</p>;
}

function Replicas({ replicas, onShowLogs }: { replicas: Deployment['replicas']; onShowLogs: (replicaId: string) => void }) {
  const [showTerminated, setShowTerminated] = useState(false);
  const shown = showTerminated ? replicas : replicas.filter((replica) => replica.status !== 'Terminated');
  const terminated = replicas.length - replicas.filter((replica) => replica.status !== 'Terminated').length;
  return (
    <>
      {terminated > 0 && (
        <p>
          <input id="show-terminated" type="checkbox" checked={showTerminated} onChange={(event) => setShowTerminated(event.target.checked)} />{' '}
          <label htmlFor="show-terminated" style={{ display: 'inline' }}>Show {terminated} terminated</label>
        </p>
      )}
      {shown.length === 0
        ? <Empty>No replicas are placed now.</Empty>
        : (
          <TableScroll><table aria-label="Replicas">
            <thead><tr><th scope="col">Replica</th><th scope="col">Status</th><th scope="col">GPU</th><th scope="col">Per hour</th><th scope="col">Engine or load</th><th scope="col">Start-up</th><th scope="col"><span className="muted">Logs</span></th></tr></thead>
            <tbody>
              {shown.map((replica) => (
                <tr key={replica.id}>
                  <td><code>{replica.id}</code></td>
                  <td>{replica.status}{replica.statusReason ? <span className="muted"> · {replica.statusReason}</span> : null}</td>
                  <td>{replica.gpuName ?? '—'}{replica.gpuMemoryGb ? ` (${replica.gpuMemoryGb} GB)` : ''}{replica.region ? `, ${replica.region}` : ''}</td>
                  <td><Money amount={replica.pricePerHour} /></td>
                  <td>{replica.status === 'Creating' ? `${replica.loadPercent ?? 0}% loaded` : replica.engineKind ?? '—'}</td>
                  <td><StartupPhases phases={replica.startupPhases} startupMs={replica.startupMs ?? null} startFailure={replica.startFailure ?? null} /></td>
                  <td><button type="button" aria-label={`Show the logs of ${replica.id}`} onClick={() => onShowLogs(replica.id)}>Logs</button></td>
                </tr>
              ))}
            </tbody>
          </table></TableScroll>
        )}
    </>
  );
}

function LoadChart({ points, latest }: { points: LoadPoint[]; latest: Record<string, ReplicaReport> }) {
  if (points.length === 0) return <Empty>No load reports yet: replicas report their load with every heartbeat once they run.</Empty>;
  const now = points[points.length - 1];
  const latencies = points.filter((point) => point.firstOutputMs !== null || point.completionMs !== null);
  const health = [...new Set(Object.values(latest).map((item) => item.engineHealth.replace(/^ENGINE_HEALTH_/, '').toLowerCase()))].join(', ');
  return (
    <figure style={{ margin: 0, background: '#fff', padding: 12, borderRadius: 8 }}>
      <div aria-hidden="true" style={{ width: '100%', height: 240 }}>
        <ResponsiveContainer width="100%" height="100%">
          <LineChart data={points} accessibilityLayer={false}>
            <CartesianGrid stroke="#e5e8ec" />
            <XAxis dataKey="time" minTickGap={40} tick={{ fill: '#3d4450' }} />
            <YAxis allowDecimals={false} tick={{ fill: '#3d4450' }} />
            <Tooltip />
            <Legend />
            <Line type="monotone" dataKey="inFlight" name="In flight" stroke="#1f5fbf" dot={false} isAnimationActive={false} />
            <Line type="monotone" dataKey="queued" name="Queued" stroke="#b04a00" dot={false} isAnimationActive={false} />
          </LineChart>
        </ResponsiveContainer>
      </div>
      <figcaption>Now: {now.inFlight} in flight, {now.queued} queued over {Object.keys(latest).length} replica(s); engine {health || 'unknown'}. {points.length} reports since this page opened.</figcaption>
      <h3>Latency</h3>
      {latencies.length === 0 ? <p className="muted">No job has finished since this page opened.</p> : (
        <>
          <div aria-hidden="true" style={{ width: '100%', height: 200 }}>
            <ResponsiveContainer width="100%" height="100%">
              <LineChart data={points} accessibilityLayer={false}>
                <CartesianGrid stroke="#e5e8ec" />
                <XAxis dataKey="time" minTickGap={40} tick={{ fill: '#3d4450' }} />
                <YAxis unit=" ms" tick={{ fill: '#3d4450' }} />
                <Tooltip />
                <Legend />
                <Line type="monotone" dataKey="firstOutputMs" name="To first output" stroke="#1f5fbf" connectNulls dot={false} isAnimationActive={false} />
                <Line type="monotone" dataKey="completionMs" name="To completion" stroke="#6b3fa0" connectNulls dot={false} isAnimationActive={false} />
              </LineChart>
            </ResponsiveContainer>
          </div>
          <p data-testid="latency-summary">
            Last measured: {formatMs(latencies[latencies.length - 1].firstOutputMs)} to first output, {formatMs(latencies[latencies.length - 1].completionMs)} to completion
            (mean over the jobs a replica finished between two heartbeats, from dispatch on this server).
          </p>
        </>
      )}
    </figure>
  );
}

function formatMs(ms: number | null): string {
  return ms === null ? '—' : `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
}

/** 0.42 req/s; — when not measured. */
function perSecond(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  return `${value >= 10 ? value.toFixed(1) : value.toFixed(2)} req/s`;
}

function ScalingDecisions({ decisions }: { decisions: Deployment['scalingDecisions'] }) {
  if (decisions.length === 0) return <Empty>No scaling decisions recorded yet.</Empty>;
  return (
    <TableScroll><table aria-label="Scaling decisions">
      <thead><tr><th scope="col">When</th><th scope="col">Action</th><th scope="col">Reason</th><th scope="col">Policy</th><th scope="col">Moved by</th><th scope="col">Replicas</th><th scope="col">Arrivals, forecast</th><th scope="col">Why</th></tr></thead>
      <tbody>
        {decisions.map((decision, index) => (
          <tr key={`${decision.decidedAt}-${index}`}>
            <td>{new Date(decision.decidedAt).toLocaleTimeString()}</td>
            <td>{decision.action.replace('_', ' ')}</td>
            <td><code>{decision.reason}</code></td>
            <td>{decision.policy}</td>
            <td>{decision.movedBy ? <code>{decision.movedBy}</code> : <span className="muted">—</span>}</td>
            <td>{decision.currentReplicas} → {decision.desiredReplicas} <span className="muted">(load asks {decision.wantedReplicas})</span></td>
            <td>{perSecond(decision.arrivalsPerSecond)}{decision.forecastArrivalsPerSecond !== null && decision.forecastArrivalsPerSecond !== undefined
              ? <>, forecast <strong>{perSecond(decision.forecastArrivalsPerSecond)}</strong></> : null}</td>
            <td>{decision.explanation}</td>
          </tr>
        ))}
      </tbody>
    </table></TableScroll>
  );
}
