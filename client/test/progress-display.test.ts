import { PassThrough } from 'node:stream';
import { ProgressDisplay } from '../src/progress-display';

// eslint-disable-next-line no-control-regex -- the escape sequences cli-progress draws with
const ESCAPES = /\u001b\[[0-9;?]*[A-Za-z]/g;

/** A terminal cli-progress can draw on: what it wrote, escape sequences removed, one string per redraw. */
function terminal() {
  const stream = Object.assign(new PassThrough(), {
    isTTY: true,
    columns: 240,
    cursorTo: () => true,
    clearLine: () => true,
    moveCursor: () => true,
  });
  let text = '';
  stream.on('data', (d: Buffer) => (text += d.toString()));
  return {
    stream: stream as unknown as NodeJS.WriteStream,
    frames: () =>
      text
        .replace(ESCAPES, '')
        .split(/[\r\n]+/)
        .filter((l) => l.trim() !== ''),
  };
}

test('the line shows each proxy with its rate; before the size is known the bar is empty, not 100 %', () => {
  let now = 0;
  const tty = terminal();
  const display = new ProgressDisplay(tty.stream, true, () => now);
  const line = display.track('movie.mp4', 2);
  now = 200;
  line.update(374_000, undefined, undefined);
  display.stop();
  expect(tty.frames().pop()).toMatch(/movie\.mp4 -+ 0% \| 374 kB of \? \| .* \| 2 proxies asked/);

  const tty2 = terminal();
  now = 0;
  const display2 = new ProgressDisplay(tty2.stream, true, () => now);
  const line2 = display2.track('movie.mp4', 2);
  now = 2000;
  line2.rangeDone([
    { proxyId: 'a', name: 'edge-a', bytes: 3_000_000, state: 'active' },
    { proxyId: 'b', name: 'edge-b', bytes: 1_000_000, state: 'failed' },
  ]);
  line2.update(4_000_000, 8_000_000, undefined);
  display2.stop();
  expect(tty2.frames().pop()).toMatch(/ 50% \| 4.00 MB of 8.00 MB \| .* \| edge-a 1.50 MB\/s edge-b lost$/);
});

test('without a terminal nothing is drawn', () => {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (d: Buffer) => (text += d.toString()));
  const display = new ProgressDisplay(stream as unknown as NodeJS.WriteStream, true);
  display.track('x', 1).update(10, 100, undefined);
  display.stop();
  expect(text).toBe('');
});
