import type { CombinedError } from 'urql';
import { ErrorView } from './states';

/** A labelled input with its hint and its own API error, both tied to it for screen readers. */
export function Field({ id, label, value, onChange, error, hint, numeric, required, type = 'text' }: {
  id: string; label: string; value: string; onChange: (value: string) => void; error?: string; hint?: string; numeric?: boolean; required?: boolean; type?: string;
}) {
  const described = [hint ? `${id}-hint` : null, error ? `${id}-error` : null].filter(Boolean).join(' ') || undefined;
  return (
    <div>
      <label htmlFor={id}>{label}</label>
      <input id={id} type={type} inputMode={numeric ? 'numeric' : undefined} value={value} required={required}
        aria-invalid={error ? true : undefined} aria-describedby={described} onChange={(event) => onChange(event.target.value)} />
      {hint && <span id={`${id}-hint`} className="muted"> {hint}</span>}
      {error && <p id={`${id}-error`} className="field-error">{error}</p>}
    </div>
  );
}

/** An API error no field claims (a network failure, a key revoked meanwhile), shown whole. */
export function UnplacedError({ error, params, title }: { error: CombinedError | undefined; params: string[]; title: string }) {
  if (!error) return null;
  if (error.graphQLErrors.length > 0 && error.graphQLErrors.every((item) => params.includes(String(item.extensions?.param)))) return null;
  return <ErrorView error={error} title={title} />;
}
