/**
 * Finds stop sequences in streamed text. OpenAI's contract: the answer ends right before the
 * first stop sequence and never contains it. A stream must therefore hold back any tail that
 * could still grow into a stop sequence ("\n\nUs" when the stop is "\n\nUser:") until the next
 * piece decides it, and release it when generation ends for another reason.
 */
export interface StopMatch {
  /** Text safe to send now. */
  readonly text: string;
  /** A stop sequence was found: `text` is the last of the answer. */
  readonly stopped: boolean;
}

export class StopMatcher {
  private held = '';
  private readonly longest: number;

  constructor(private readonly stops: readonly string[]) {
    this.longest = stops.reduce((max, stop) => Math.max(max, stop.length), 0);
  }

  push(piece: string): StopMatch {
    if (this.longest === 0) return { text: piece, stopped: false };
    const text = this.held + piece;
    let first = -1;
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at !== -1 && (first === -1 || at < first)) first = at;
    }
    if (first !== -1) {
      this.held = '';
      return { text: text.slice(0, first), stopped: true };
    }
    const keep = this.partialTail(text);
    this.held = text.slice(text.length - keep);
    return { text: text.slice(0, text.length - keep), stopped: false };
  }

  /** Generation ended without a stop sequence: whatever was held back is part of the answer. */
  flush(): string {
    const rest = this.held;
    this.held = '';
    return rest;
  }

  /** Length of the longest suffix of `text` that is a proper prefix of some stop sequence. */
  private partialTail(text: string): number {
    for (let length = Math.min(this.longest - 1, text.length); length > 0; length--) {
      const tail = text.slice(text.length - length);
      if (this.stops.some((stop) => stop.startsWith(tail))) return length;
    }
    return 0;
  }
}
