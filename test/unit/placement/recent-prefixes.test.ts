/**
 * RecentPrefixes (control-plane/placement/recent-prefixes.ts): which replica × application pairs
 * this server sent a prompt to lately, bounded, oldest first out. Only tells `prefix_hit` from
 * `prefix_cold` in the routing metrics.
 */
import { RecentPrefixes } from '../../../control-plane/placement/recent-prefixes';

describe('RecentPrefixes', () => {
  it('answers false the first time a replica gets an application, true after', () => {
    const recent = new RecentPrefixes();
    expect(recent.sent('rep_a', 1)).toBe(false);
    expect(recent.sent('rep_a', 1)).toBe(true);
    expect(recent.sent('rep_a', 1)).toBe(true);
  });

  it('keeps replicas and applications apart', () => {
    const recent = new RecentPrefixes();
    expect(recent.sent('rep_a', 1)).toBe(false);
    expect(recent.sent('rep_b', 1)).toBe(false);
    expect(recent.sent('rep_a', 2)).toBe(false);
    expect(recent.sent('rep_a', 1)).toBe(true);
    expect(recent.sent('rep_b', 1)).toBe(true);
    expect(recent.sent('rep_a', 2)).toBe(true);
    // The id and the number are separated: "rep_1" × 23 is not "rep_12" × 3.
    expect(recent.sent('rep_1', 23)).toBe(false);
    expect(recent.sent('rep_12', 3)).toBe(false);
  });

  it('evicts the oldest entry past its capacity', () => {
    const recent = new RecentPrefixes(3);
    recent.sent('r', 1);
    recent.sent('r', 2);
    recent.sent('r', 3);
    recent.sent('r', 4); // evicts 1
    expect(recent.sent('r', 2)).toBe(true); // 2 is now the newest: order 3, 4, 2
    expect(recent.sent('r', 1)).toBe(false); // forgotten; re-adding it evicts 3
    expect(recent.sent('r', 4)).toBe(true);
    expect(recent.sent('r', 3)).toBe(false);
  });

  it('counts a repeated entry as recent again (least recently used, not first in)', () => {
    const recent = new RecentPrefixes(2);
    recent.sent('r', 1);
    recent.sent('r', 2);
    recent.sent('r', 1); // 1 refreshed: 2 is the oldest
    recent.sent('r', 3); // evicts 2
    expect(recent.sent('r', 1)).toBe(true);
    expect(recent.sent('r', 2)).toBe(false);
  });

  it('stays bounded under a flood of distinct prompts', () => {
    const recent = new RecentPrefixes(100);
    for (let application = 0; application < 10_000; application++) recent.sent('r', application);
    expect((recent as unknown as { entries: Map<string, true> }).entries.size).toBe(100);
    expect(recent.sent('r', 9_999)).toBe(true);
    expect(recent.sent('r', 9_899)).toBe(false);
  });
});
