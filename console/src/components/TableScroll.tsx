import { useLayoutEffect, useRef, useState, type ReactNode } from 'react';

/**
 * A wide table's own sideways scroll (the page never scrolls sideways: a phone-wide window
 * scrolls the table in its box). While it does scroll, the box is a named region a keyboard can
 * focus and scroll with the arrow keys (axe: scrollable-region-focusable); while it fits, it is
 * no tab stop.
 */
export function TableScroll({ children }: { children: ReactNode }) {
  const box = useRef<HTMLDivElement>(null);
  const [label, setLabel] = useState<string | null>(null);
  useLayoutEffect(() => {
    const element = box.current;
    if (!element) return;
    const check = () => {
      const table = element.querySelector('table');
      const name = table?.getAttribute('aria-label') ?? table?.querySelector('caption')?.textContent ?? 'Table';
      setLabel(element.scrollWidth > element.clientWidth ? `${name} (scrolls sideways)` : null);
    };
    check();
    const observer = new ResizeObserver(check);
    observer.observe(element);
    if (element.firstElementChild) observer.observe(element.firstElementChild);
    return () => observer.disconnect();
  }, []);
  return (
    <div ref={box} className="table-scroll" tabIndex={label ? 0 : undefined} role={label ? 'region' : undefined} aria-label={label ?? undefined}>
      {children}
    </div>
  );
}
