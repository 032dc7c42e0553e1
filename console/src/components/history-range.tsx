import { useEffect, useState } from 'react';

/** Each range and its step: about a hundred points or fewer, so every chart stays readable. */
export const RANGES = [
  { key: '1h', label: '1 hour', minutes: 60, step: 1 },
  { key: '24h', label: '24 hours', minutes: 1_440, step: 15 },
  { key: '7d', label: '7 days', minutes: 10_080, step: 60 },
] as const;
export type RangeKey = typeof RANGES[number]['key'];
export type HistoryRange = typeof RANGES[number];

const PRESSED = { background: '#e8eefc', borderColor: '#1f5fbf', fontWeight: 600 } as const;

/** The range buttons; the deployment page keeps one range for its History and Autoscaling charts. */
export function RangeButtons({ value, onChange, label = 'Time range' }: { value: RangeKey; onChange: (key: RangeKey) => void; label?: string }) {
  return (
    <div role="group" aria-label={label} style={{ display: 'flex', gap: 8, marginBottom: 12 }}>
      {RANGES.map((item) => (
        <button key={item.key} type="button" aria-pressed={item.key === value} style={item.key === value ? PRESSED : undefined}
          onClick={() => onChange(item.key)}>{item.label}</button>
      ))}
    </div>
  );
}

/** The range's window in whole minutes (the rollups' unit), moving on every minute. */
export function useHistoryWindow(rangeKey: RangeKey): { range: HistoryRange; from: string; to: string } {
  const range = RANGES.find((item) => item.key === rangeKey)!;
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 60_000);
    return () => clearInterval(timer);
  }, []);
  const to = new Date(Math.ceil(now / 60_000) * 60_000);
  const from = new Date(to.getTime() - range.minutes * 60_000);
  return { range, from: from.toISOString(), to: to.toISOString() };
}

/** A step's label on a chart's axis: its time, and its weekday over a week. */
export function labelOf(iso: string, rangeMinutes: number): string {
  const date = new Date(iso);
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return rangeMinutes > 1_440 ? `${date.toLocaleDateString([], { weekday: 'short' })} ${time}` : time;
}

/** Per minute, per 15 minutes, per hour. */
export function stepWords(stepMinutes: number): string {
  return stepMinutes === 1 ? 'minute' : stepMinutes < 60 ? `${stepMinutes} minutes` : `${stepMinutes / 60} hour${stepMinutes === 60 ? '' : 's'}`;
}
