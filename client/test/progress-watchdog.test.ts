import { ProgressWatchdog } from '../src/progress-watchdog';

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

function watchdog(timeoutMs: number) {
  const idle: string[] = [];
  const dog = new ProgressWatchdog(timeoutMs, (reason) => idle.push(reason.message));
  return { dog, idle };
}

test('no progress for the timeout gives up once; bytes that arrive postpone it', () => {
  const { dog, idle } = watchdog(1000);
  jest.advanceTimersByTime(900);
  dog.progress(10);
  jest.advanceTimersByTime(900);
  dog.progress(10); // the same count is no progress
  expect(idle).toEqual([]);
  jest.advanceTimersByTime(100);
  expect(idle).toEqual(['no progress for 1000 ms']);
  jest.advanceTimersByTime(5000);
  expect(idle).toHaveLength(1);
  dog.stop();
});

test('waiting for the output reader does not count, however long; the clock starts afresh after it', async () => {
  const { dog, idle } = watchdog(1000);
  let drained!: () => void;
  const held = dog.holdWhile(new Promise<void>((resolve) => (drained = resolve)));
  jest.advanceTimersByTime(10_000); // a range draining into `pv -L 50k`
  expect(idle).toEqual([]);
  drained();
  await held;
  jest.advanceTimersByTime(999);
  expect(idle).toEqual([]);
  jest.advanceTimersByTime(1000);
  expect(idle).toEqual(['no progress for 1000 ms']);
  dog.stop();
});

test('stopped, it never fires', () => {
  const { dog, idle } = watchdog(1000);
  dog.stop();
  jest.advanceTimersByTime(5000);
  expect(idle).toEqual([]);
});
