import { DatagramBatches, frameTasks, MAX_RUN, readInto, ScheduleTask } from '../src/downloader/datagram-batches';

/** A scheduler the test runs by hand: tasks wait until `runTasks`. */
function manualTasks(): { schedule: ScheduleTask; runTasks(): number } {
  let queued: (() => void)[] = [];
  return {
    schedule: (run) => queued.push(run),
    runTasks: () => {
      const runs = queued;
      queued = [];
      runs.forEach((run) => run());
      return runs.length;
    },
  };
}

/** A stream with `count` one-byte datagrams already queued, as the browser queues a burst. */
function burst(count: number): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        for (let i = 0; i < count; i++) controller.enqueue(Uint8Array.of(i));
        controller.close();
      },
    },
    { highWaterMark: count },
  );
}

/**
 * What the client core does with delivered datagrams (shared/src/client/download.ts): it answers
 * them once per run of synchronous deliveries, in a microtask queued after the first.
 */
function coreLike(): { handle(bytes: Uint8Array): void; flushes: number; seen: number[] } {
  const core = {
    flushes: 0,
    seen: [] as number[],
    queued: false,
    handle(bytes: Uint8Array) {
      core.seen.push(bytes[0]);
      if (core.queued) return;
      core.queued = true;
      queueMicrotask(() => {
        core.queued = false;
        core.flushes++;
      });
    },
  };
  return core;
}

describe('DatagramBatches', () => {
  it('delivers what was read before the next task in one run, each with the time it was read', () => {
    const tasks = manualTasks();
    let clock = 100;
    const delivered: [number, number][] = [];
    const batches = new DatagramBatches(
      (b, at) => delivered.push([b[0], at]),
      tasks.schedule,
      () => clock,
    );
    batches.push(Uint8Array.of(1));
    clock = 101;
    batches.push(Uint8Array.of(2));
    batches.push(Uint8Array.of(3));
    expect(delivered).toEqual([]);
    expect(tasks.runTasks()).toBe(1);
    expect(delivered).toEqual([
      [1, 100],
      [2, 101],
      [3, 101],
    ]);
    batches.push(Uint8Array.of(4));
    expect(tasks.runTasks()).toBe(1);
    expect(delivered.map(([b]) => b)).toEqual([1, 2, 3, 4]);
  });

  it('delivers a full batch at once: the queue never holds more than maxBatch', () => {
    const tasks = manualTasks();
    const delivered: number[] = [];
    const counters = { datagrams: 0, batches: 0, largestBatch: 0 };
    const batches = new DatagramBatches(
      (b) => delivered.push(b[0]),
      tasks.schedule,
      () => 0,
      counters,
      4,
    );
    for (let i = 0; i < 10; i++) batches.push(Uint8Array.of(i));
    expect(delivered).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    tasks.runTasks();
    expect(delivered).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(counters).toEqual({ datagrams: 10, batches: 3, largestBatch: 4 });
  });

  it('delivers a batch in runs of maxRun, the core answering each before the next; a later batch follows in order', async () => {
    const tasks = manualTasks();
    const core = coreLike();
    const order: string[] = [];
    const batches = new DatagramBatches(
      (b) => {
        order.push(`d${b[0]}`);
        core.handle(b);
      },
      tasks.schedule,
      () => 0,
      undefined,
      1024,
      3,
    );
    for (let i = 0; i < 7; i++) batches.push(Uint8Array.of(i));
    tasks.runTasks();
    expect(core.seen).toEqual([0, 1, 2]); // the first run; the rest waits behind the core's answer
    batches.push(Uint8Array.of(7)); // read meanwhile: queued behind the runs still to come
    tasks.runTasks();
    expect(core.seen).toEqual([0, 1, 2]);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(core.seen).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(core.flushes).toBe(3);
    expect(order).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7']);
  });

  it('delivers nothing after close, not even the rest of a batch being delivered', () => {
    const tasks = manualTasks();
    const delivered: number[] = [];
    const batches = new DatagramBatches(
      (b) => {
        delivered.push(b[0]);
        if (b[0] === 1) batches.close();
      },
      tasks.schedule,
      () => 0,
    );
    [0, 1, 2].forEach((i) => batches.push(Uint8Array.of(i)));
    tasks.runTasks();
    batches.push(Uint8Array.of(3));
    tasks.runTasks();
    expect(delivered).toEqual([0, 1]);
  });

  it('with a real stream and task queue, a burst costs the core one answer per MAX_RUN, not one per datagram', async () => {
    const nextTask = frameTasks(() => false);
    const core = coreLike();
    const batches = new DatagramBatches(
      (b) => core.handle(b),
      nextTask,
      () => 0,
    );
    await readInto(burst(50).getReader(), batches);
    expect(core.seen).toEqual([]); // read, and queued for the next task
    await new Promise<void>((resolve) => nextTask(resolve)); // after the batch's task and its runs
    await Promise.resolve();
    expect(core.seen).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(core.flushes).toBe(Math.ceil(50 / MAX_RUN));

    // The loop this replaces (deliver as read): the core's microtask runs between every two reads.
    const direct = coreLike();
    const reader = burst(50).getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) direct.handle(r.value);
    await Promise.resolve();
    expect(direct.seen).toHaveLength(50);
    expect(direct.flushes).toBe(50);
  });
});

describe('frameTasks', () => {
  afterEach(() => jest.useRealTimers());

  it('uses a timer while the page is visible and a message while it is hidden (timers are throttled there)', async () => {
    let hidden = false;
    const schedule = frameTasks(() => hidden);
    jest.useFakeTimers({ doNotFake: ['queueMicrotask', 'nextTick', 'setImmediate'] });
    const ran: string[] = [];
    schedule(() => ran.push('visible'));
    expect(jest.getTimerCount()).toBe(1);
    jest.runOnlyPendingTimers();
    expect(ran).toEqual(['visible']);

    hidden = true;
    const done = new Promise<void>((resolve) =>
      schedule(() => {
        ran.push('hidden');
        resolve();
      }),
    );
    expect(jest.getTimerCount()).toBe(0); // no timer: a message
    await done;
    expect(ran).toEqual(['visible', 'hidden']);
  });

  it('runs after the microtasks queued before it', async () => {
    for (const hidden of [false, true]) {
      const schedule = frameTasks(() => hidden);
      const order: string[] = [];
      const done = new Promise<void>((resolve) =>
        schedule(() => {
          order.push('task');
          resolve();
        }),
      );
      queueMicrotask(() => order.push('microtask'));
      await done;
      expect(order).toEqual(['microtask', 'task']);
    }
  });
});
