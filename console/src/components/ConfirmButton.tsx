import { useEffect, useRef, useState } from 'react';

/**
 * A destructive action asks once more before it runs. Keyboard focus follows: to "Cancel" when
 * the question appears (Enter on the trigger then Enter again does not confirm by accident), and
 * back to the trigger when the question goes away. `accessibleName` names what the action is on
 * for assistive technology ("Cancel batch_…") where a row shows many alike: the visible label
 * stays short ("Cancel") and the name starts with it (WCAG 2.5.3, label in name).
 */
export function ConfirmButton({ label, question, onConfirm, disabled, accessibleName }: {
  label: string; question: string; onConfirm: () => void; disabled?: boolean; accessibleName?: string;
}) {
  const [asking, setAsking] = useState(false);
  const trigger = useRef<HTMLButtonElement>(null);
  const cancel = useRef<HTMLButtonElement>(null);
  const wasAsking = useRef(false);
  useEffect(() => {
    if (asking) cancel.current?.focus();
    else if (wasAsking.current) trigger.current?.focus();
    wasAsking.current = asking;
  }, [asking]);
  if (!asking) return <button ref={trigger} type="button" disabled={disabled} aria-label={accessibleName} onClick={() => setAsking(true)}>{label}</button>;
  const confirmName = accessibleName ? `Yes, ${accessibleName.charAt(0).toLowerCase()}${accessibleName.slice(1)}` : undefined;
  return (
    <span role="group" aria-label={accessibleName ? `${question} (${accessibleName})` : question} className="confirm">
      {question}{' '}
      <button type="button" className="danger" aria-label={confirmName} onClick={() => { setAsking(false); onConfirm(); }}>Yes, {label.toLowerCase()}</button>
      <button ref={cancel} type="button" onClick={() => setAsking(false)}>Cancel</button>
    </span>
  );
}
