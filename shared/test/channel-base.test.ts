/**
 * DatagramChannelBase (shared/src/channel-base.ts), the lifecycle both WebRTC adapters' channels
 * share, over a scripted platform channel: open and close are reported once each, in order, with
 * the platform's last error as the reason; the low-water wake-up stops once the channel closes.
 */
import { DatagramChannelBase } from '../src';

/** A platform channel driven by the test: it fires the events an adapter forwards to the base. */
class ScriptedChannel extends DatagramChannelBase {
  readonly platformCalls: string[] = [];
  bufferedAmount = 0;

  get isOpen(): boolean {
    return !this.closed;
  }

  send(): boolean {
    return !this.closed;
  }

  platformOpen(): void {
    this.markOpen();
  }

  platformError(message: string): void {
    this.lastError = message;
  }

  platformClose(): void {
    this.markClosed(this.lastError);
  }

  platformLow(): void {
    this.bufferedAmountLow();
  }

  protected setPlatformLowWaterMark(bytes: number): void {
    this.platformCalls.push(`threshold ${bytes}`);
  }

  protected closePlatformChannel(): void {
    this.platformCalls.push('close');
  }
}

function recorded(channel: ScriptedChannel): string[] {
  const events: string[] = [];
  channel.onOpen = () => events.push('open');
  channel.onRelease = () => events.push('release');
  channel.onClose = (reason) => events.push(`close: ${reason}`);
  return events;
}

test('open is reported once; a local close closes the platform channel, then releases, then reports', () => {
  const channel = new ScriptedChannel('mutp-data');
  const events = recorded(channel);
  expect(channel.label).toBe('mutp-data');
  channel.platformOpen();
  channel.platformOpen();
  channel.close();
  channel.close();
  channel.platformClose();
  channel.platformOpen();
  expect(events).toEqual(['open', 'release', 'close: closed locally']);
  expect(channel.platformCalls).toEqual(['close']);
  expect(channel.send()).toBe(false);
});

test('a close by the platform gives its last error as the reason, and the channel is not closed again', () => {
  const channel = new ScriptedChannel('mutp-feedback');
  const events = recorded(channel);
  channel.platformError('SCTP association lost');
  channel.platformClose();
  channel.close();
  expect(events).toEqual(['release', 'close: SCTP association lost']);
  expect(channel.platformCalls).toEqual([]);
});

test('the low-water mark reaches the platform in whole bytes and wakes the sender only while open', () => {
  const channel = new ScriptedChannel('mutp-data');
  let wakeUps = 0;
  channel.setLowWaterMark(-5, () => wakeUps++);
  channel.setLowWaterMark(1500.7, () => wakeUps++);
  channel.platformLow();
  channel.close();
  channel.platformLow();
  channel.setLowWaterMark(2000, () => wakeUps++);
  expect(channel.platformCalls).toEqual(['threshold 0', 'threshold 1500', 'close']);
  expect(wakeUps).toBe(1);
});
