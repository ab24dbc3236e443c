/**
 * ActivityBoard, the shared-memory counts of in-flight requests per slot: slots handed out once and
 * reused zeroed, the last-activity time, waitIdle woken by the last end or timing out, and a second view
 * of the same memory reading the counts made through the first.
 */
import { describe, expect, it, vi } from 'vitest';
import { ActivityBoard } from './activity-board.js';

function smallBoard(slots: number): ActivityBoard {
  return new ActivityBoard({
    inflight: new SharedArrayBuffer(slots * 4),
    lastActivity: new SharedArrayBuffer(slots * 8),
    busy: new SharedArrayBuffer(slots * 8),
  });
}

describe('ActivityBoard', () => {
  it('hands out each slot once, reuses freed ones zeroed, and says when none is left', () => {
    const board = smallBoard(2);
    const a = board.allocate() as number;
    const b = board.allocate() as number;
    expect([a, b].sort()).toEqual([0, 1]);
    expect(board.allocate()).toBeUndefined();
    board.begin(a);
    board.begin(a);
    expect(board.inflightOf(a)).toBe(2);
    expect(board.inflightOf(b)).toBe(0);
    board.free(a);
    expect(board.allocate()).toBe(a);
    expect(board.inflightOf(a)).toBe(0);
  });

  it('records the time of the last request start or end', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    try {
      const board = smallBoard(1);
      const slot = board.allocate() as number;
      expect(board.lastActivityOf(slot)).toBe(1_000_000);
      vi.setSystemTime(1_005_000);
      board.begin(slot);
      expect(board.lastActivityOf(slot)).toBe(1_005_000);
      vi.setSystemTime(1_009_000);
      board.end(slot);
      expect(board.lastActivityOf(slot)).toBe(1_009_000);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps the request-milliseconds spent, so two readings give the time-weighted in-flight average', () => {
    vi.useFakeTimers({ now: 2_000_000 });
    try {
      const board = smallBoard(2);
      const slot = board.allocate() as number;
      const other = new ActivityBoard(board.memory);
      const from = board.busyMsOf(slot);
      // One request over the whole second, another (counted on the other view) over its last 250 ms.
      board.begin(slot);
      vi.setSystemTime(2_000_750);
      other.begin(slot);
      vi.setSystemTime(2_001_000);
      expect((board.busyMsOf(slot) - from) / 1000).toBe(1.25);
      other.end(slot);
      vi.setSystemTime(2_002_000);
      // The second second: the first request alone, still in flight.
      expect(board.busyMsOf(slot) - from).toBe(2250);
      board.end(slot);
      vi.setSystemTime(2_003_000);
      expect(board.busyMsOf(slot) - from).toBe(2250);
      // A reallocated slot starts from nothing.
      board.free(slot);
      expect(board.allocate()).toBe(slot);
      expect(board.busyMsOf(slot)).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('waitIdle resolves when the last request ends, and false when the time runs out first', async () => {
    const board = smallBoard(1);
    const slot = board.allocate() as number;
    expect(await board.waitIdle(slot, 10)).toBe(true);
    board.begin(slot);
    board.begin(slot);
    expect(await board.waitIdle(slot, 20)).toBe(false);
    // Longer than the test may take: only the wake-up from end() can make it resolve in time.
    const idle = board.waitIdle(slot, 600_000);
    board.end(slot);
    setTimeout(() => board.end(slot), 5);
    expect(await idle).toBe(true);
    expect(board.inflightOf(slot)).toBe(0);
  });

  it('is the same memory on another view: counts made there are read here', () => {
    const board = smallBoard(4);
    const other = new ActivityBoard(board.memory);
    const slot = board.allocate() as number;
    other.begin(slot);
    expect(board.inflightOf(slot)).toBe(1);
    other.end(slot);
    expect(board.inflightOf(slot)).toBe(0);
  });
});
