/** A request's marks, ms after it arrived (GraphQL `RequestPhases`). */
export interface Phases {
  admittedMs?: number | null;
  dispatchedMs?: number | null;
  startedMs?: number | null;
  firstTokenMs?: number | null;
  endedMs?: number | null;
}

/** The steps of a request in order, each a bar from the step before it to its own mark. */
const STEPS: Array<{ key: keyof Phases; label: string; color: string }> = [
  { key: 'admittedMs', label: 'Admission', color: '#6b7c93' },
  { key: 'dispatchedMs', label: 'Placement and dispatch', color: '#1f5fbf' },
  { key: 'startedMs', label: 'Wait at the replica', color: '#b04a00' },
  { key: 'firstTokenMs', label: 'To first token', color: '#6b3fa0' },
  { key: 'endedMs', label: 'Generation to end', color: '#2e7d32' },
];

const WIDTH = 640;
const LABEL_WIDTH = 190;
const ROW = 26;

/**
 * A request's trace as bars on one time axis (hand-drawn SVG): each step from the previous mark
 * to its own, so the longest bar is where the time went. Steps the request never reached (or
 * that were not marked) are left out; `latencyMs` closes the axis when no end was marked.
 */
export function TraceTimeline({ phases, latencyMs }: { phases: Phases | null | undefined; latencyMs: number }) {
  const marks = STEPS.filter((step) => typeof phases?.[step.key] === 'number');
  if (!phases || marks.length === 0) return <p className="muted">No timeline was recorded for this request.</p>;
  const total = Math.max(latencyMs, ...marks.map((step) => phases[step.key] as number), 1);
  const scale = (ms: number) => LABEL_WIDTH + (ms / total) * (WIDTH - LABEL_WIDTH - 70);
  let previous = 0;
  const bars = marks.map((step) => {
    const at = phases[step.key] as number;
    const bar = { ...step, start: previous, end: at };
    previous = Math.max(previous, at);
    return bar;
  });
  const height = bars.length * ROW + 24;
  return (
    <figure style={{ margin: 0, background: '#fff', padding: 12, borderRadius: 8 }} data-testid="trace-timeline">
      <svg role="img" aria-label={`Timeline: ${bars.map((bar) => `${bar.label} ${formatDuration(bar.end - bar.start)}`).join(', ')}`} viewBox={`0 0 ${WIDTH} ${height}`}
        width="100%" style={{ maxWidth: WIDTH }}>
        {bars.map((bar, index) => {
          const y = index * ROW + 4;
          const x = scale(bar.start);
          const width = Math.max(2, scale(bar.end) - x);
          return (
            <g key={bar.key}>
              <text x={0} y={y + 15} fontSize={12} fill="#1b1f24">{bar.label}</text>
              <rect x={x} y={y + 3} width={width} height={16} rx={3} fill={bar.color} />
              <text x={x + width + 6} y={y + 15} fontSize={11} fill="#3d4450">{formatDuration(bar.end - bar.start)}</text>
            </g>
          );
        })}
        <line x1={LABEL_WIDTH} x2={scale(total)} y1={height - 16} y2={height - 16} stroke="#c4cad3" />
        <text x={LABEL_WIDTH} y={height - 2} fontSize={11} fill="#3d4450">0</text>
        <text x={scale(total)} y={height - 2} fontSize={11} fill="#3d4450" textAnchor="end">{formatDuration(total)}</text>
      </svg>
      <figcaption className="muted">Each bar runs from the previous step to this one, in time after the request arrived.</figcaption>
    </figure>
  );
}

/** A duration as people read it: µs precision is noise here, so ms below a second, s above. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms >= 1_000) return `${(ms / 1_000).toFixed(2)} s`;
  return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
}
