/**
 * A replica's cold start in one cell: each start-up phase with its time (provision, download or
 * the cache hit that skipped it, load, warm-up) and the whole start once it is ready; while it
 * starts, the phase it is in. docs/autoscaling.md#cold-starts says what each phase covers.
 */
export interface StartupPhaseView {
  readonly name: string;
  readonly durationMs: number;
  readonly done: boolean;
  readonly detail: string;
}

const NAMES: Record<string, string> = { provision: 'provision', download: 'download', load: 'load', warm_up: 'warm-up' };

/** 850 ms, 4.2 s, 37 s, 2 min 5 s. */
export function formatDuration(milliseconds: number): string {
  if (milliseconds < 1_000) return `${Math.round(milliseconds)} ms`;
  const seconds = milliseconds / 1_000;
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  const rest = Math.round(seconds - minutes * 60);
  return rest === 0 ? `${minutes} min` : `${minutes} min ${rest} s`;
}

export function StartupPhases({ phases, startupMs, startFailure }: { phases: readonly StartupPhaseView[]; startupMs: number | null; startFailure: string | null }) {
  if (phases.length === 0) return <span className="muted">—</span>;
  const stuck = phases.find((phase) => !phase.done);
  return (
    <span data-testid="startup-phases">
      {startupMs !== null && <strong>{formatDuration(startupMs)}</strong>}
      {stuck && <strong>{startFailure ? 'never ready: ' : ''}in {NAMES[stuck.name] ?? stuck.name}</strong>}
      <ul aria-label="Start-up phases" style={{ listStyle: 'none', margin: 0, padding: 0 }}>
        {phases.map((phase) => (
          <li key={phase.name} className={phase.done ? undefined : 'muted'}>
            {NAMES[phase.name] ?? phase.name} {formatDuration(phase.durationMs)}{phase.done ? '' : '…'}
            {phase.detail && phase.name !== 'provision' ? <span className="muted"> ({phase.detail})</span> : null}
          </li>
        ))}
      </ul>
    </span>
  );
}
