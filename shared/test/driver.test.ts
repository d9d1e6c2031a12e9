/** DeadlineTimer: the deadline loop shared by the proxy, the client and the simulator. */
import { DeadlineTimer, TimedMachine } from '../src/internal';

/** A host timer that records what is armed and fires on demand. */
class ManualTimers {
  now = 0;
  armed: { at: number; fire: () => void; cancelled: boolean }[] = [];
  scheduleAt = (at: number, fire: () => void) => {
    const t = { at, fire, cancelled: false };
    this.armed.push(t);
    return () => (t.cancelled = true);
  };
  live() {
    return this.armed.filter((t) => !t.cancelled).map((t) => t.at);
  }
  fireAt(at: number) {
    this.now = at;
    const due = this.armed.filter((x) => x.at === at && !x.cancelled);
    this.armed = this.armed.filter((x) => !due.includes(x));
    for (const t of due) t.fire();
  }
}

function machine(deadlines: (number | null)[]): TimedMachine & { handled: number[] } {
  let i = 0;
  const m = {
    handled: [] as number[],
    nextDeadline: () => deadlines[Math.min(i, deadlines.length - 1)],
    handleTimeout(now: number) {
      m.handled.push(now);
      i++;
    },
  };
  return m;
}

test('arms at the deadline, moves only to an earlier one, and hands the machine the time when due', () => {
  const timers = new ManualTimers();
  let deadline: number | null = 50;
  const handled: number[] = [];
  const flushed: number[] = [];
  const m: TimedMachine = { nextDeadline: () => deadline, handleTimeout: (now) => handled.push(now) };
  const timer = new DeadlineTimer(
    m,
    timers.scheduleAt,
    () => timers.now,
    (now) => flushed.push(now),
  );
  timer.arm();
  expect(timers.live()).toEqual([50]);
  deadline = 80; // later: the armed timer stays, its firing re-arms
  timer.arm();
  expect(timers.live()).toEqual([50]);
  deadline = 20; // earlier: moved
  timer.arm();
  expect(timers.live()).toEqual([20]);
  deadline = 30; // the machine moved on before the timer fired: nothing due at 20
  timers.fireAt(20);
  expect(handled).toEqual([]);
  expect(flushed).toEqual([20]);
  timer.arm();
  timers.fireAt(30);
  expect(handled).toEqual([30]);
});

test('no deadline leaves the armed timer; stop() cancels it and ignores a stale one', () => {
  const timers = new ManualTimers();
  const m = machine([10, null]);
  const flushed: number[] = [];
  const timer = new DeadlineTimer(
    m,
    timers.scheduleAt,
    () => timers.now,
    (now) => flushed.push(now),
  );
  timer.arm();
  timers.fireAt(10);
  expect(m.handled).toEqual([10]);
  timer.arm(); // null: nothing armed
  expect(timers.live()).toEqual([]);
  const m2 = machine([40]);
  const stale: (() => void)[] = [];
  const t2 = new DeadlineTimer(
    m2,
    (_at, fire) => {
      stale.push(fire); // a host that cannot cancel
      return () => undefined;
    },
    () => 40,
    (now) => flushed.push(now),
  );
  t2.arm();
  t2.stop();
  stale.forEach((fire) => fire());
  expect(m2.handled).toEqual([]);
  expect(flushed).toEqual([10]);
});
