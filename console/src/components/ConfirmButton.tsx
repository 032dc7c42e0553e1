import { useEffect, useRef, useState } from 'react';

/**
 * A destructive action asks once more before it runs. Keyboard focus follows: to "Cancel" when
 * the question appears (Enter on the trigger then Enter again does not confirm by accident), and
 * back to the trigger when the question goes away.
 */
export function ConfirmButton({ label, question, onConfirm, disabled }: { label: string; question: string; onConfirm: () => void; disabled?: boolean }) {
  const [asking, setAsking] = useState(false);
  const trigger = useRef<HTMLButtonElement>(null);
  const cancel = useRef<HTMLButtonElement>(null);
  const wasAsking = useRef(false);
  useEffect(() => {
    if (asking) cancel.current?.focus();
    else if (wasAsking.current) trigger.current?.focus();
    wasAsking.current = asking;
  }, [asking]);
  if (!asking) return <button ref={trigger} type="button" disabled={disabled} onClick={() => setAsking(true)}>{label}</button>;
  return (
    <span role="group" aria-label={question} className="confirm">
      {question}{' '}
      <button type="button" className="danger" onClick={() => { setAsking(false); onConfirm(); }}>Yes, {label.toLowerCase()}</button>
      <button ref={cancel} type="button" onClick={() => setAsking(false)}>Cancel</button>
    </span>
  );
}
