import { TurnBudget, TurnBudgetStats, TurnClock } from '../src/turn-budget';

/** A clock whose turns end when the test says so. */
function manualClock(): { clock: TurnClock; endTurn: () => void } {
  let pending: (() => void) | undefined;
  const clock = new TurnClock((f) => {
    pending = f;
  });
  return {
    clock,
    endTurn: () => {
      const f = pending;
      pending = undefined;
      f?.();
    },
  };
}

const admitted = (budget: TurnBudget, messages: number) => {
  let n = 0;
  for (let i = 0; i < messages; i++) if (budget.admit()) n++;
  return n;
};

describe('TurnBudget', () => {
  it('hands on at most perTurn messages per turn and drops the rest of that turn', () => {
    const { clock, endTurn } = manualClock();
    const stats: TurnBudgetStats = { delivered: 0, dropped: 0, largestTurn: 0 };
    const budget = new TurnBudget(4, clock, stats);
    expect(admitted(budget, 10)).toBe(4);
    endTurn();
    // A new turn has a full budget again.
    expect(admitted(budget, 3)).toBe(3);
    endTurn();
    expect(admitted(budget, 5)).toBe(4);
    expect(stats).toEqual({ delivered: 11, dropped: 7, largestTurn: 10 });
  });

  it('counts each channel on its own within one turn', () => {
    const { clock, endTurn } = manualClock();
    const stats: TurnBudgetStats = { delivered: 0, dropped: 0, largestTurn: 0 };
    const a = new TurnBudget(2, clock, stats);
    const b = new TurnBudget(2, clock, stats);
    expect(admitted(a, 3)).toBe(2);
    expect(admitted(b, 2)).toBe(2);
    endTurn();
    expect(admitted(a, 1)).toBe(1);
    expect(stats.dropped).toBe(1);
  });

  it('ends a turn at the next check phase of the event loop by default', async () => {
    const stats: TurnBudgetStats = { delivered: 0, dropped: 0, largestTurn: 0 };
    const budget = new TurnBudget(1, new TurnClock(), stats);
    expect(budget.admit()).toBe(true);
    expect(budget.admit()).toBe(false);
    await new Promise((resolve) => setImmediate(resolve));
    expect(budget.admit()).toBe(true);
  });

  it('refuses a budget below one message', () => {
    expect(() => new TurnBudget(0, new TurnClock(), { delivered: 0, dropped: 0, largestTurn: 0 })).toThrow(RangeError);
  });
});
