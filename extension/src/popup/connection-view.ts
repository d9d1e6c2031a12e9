/**
 * The connection box of the popup and the options page: where the origo URL comes from (not
 * configured = the loopback default of a local test set-up; set by the administrator; the
 * user's), the last check's outcome in words, and the "Test connection" button.
 */
import { checkConnection, ConnectionReport } from '../common/connection';
import { DEFAULT_SETTINGS, SettingsState } from '../common/settings';
import { openWebSocket } from '../downloader/host';
import { systemClock } from '@mutp/shared/client';
import { formatMs } from './format';

function line(text: string, className = ''): HTMLDivElement {
  const div = document.createElement('div');
  div.textContent = text;
  if (className) div.className = className;
  return div;
}

/** What the origo setting is, in words (and whether it needs the user's attention). */
export function origoSourceLine(state: SettingsState): { text: string; warn: boolean } {
  const url = state.settings.origoUrl;
  if (state.origoSource === 'managed') return { text: `origo (set by your administrator): ${url}`, warn: false };
  if (state.origoSource === 'default') {
    return {
      text: `origo not configured: using the local default ${DEFAULT_SETTINGS.origoUrl} (a test set-up on this machine). Set your deployment's wss:// URL in the options.`,
      warn: true,
    };
  }
  return { text: `origo: ${url}`, warn: false };
}

/** The check's outcome in one or two lines. */
export function reportLines(r: ConnectionReport): { text: string; ok: boolean }[] {
  if (r.origo !== 'reachable') {
    const what = r.origo === 'refused-url' ? 'origo URL refused' : 'origo unreachable';
    return [{ text: `✗ ${what}: ${r.detail ?? ''}`, ok: false }];
  }
  const offered = r.offered ?? 0;
  const lines = [
    {
      text: `✓ origo reachable (${formatMs(r.ms)}): ${offered} ${offered === 1 ? 'proxy' : 'proxies'} offered for ${r.mode} (asked for ${r.asked})`,
      ok: offered > 0,
    },
  ];
  if (offered === 0) lines[0].text += ': downloads will go to the network';
  if (r.proxy) {
    lines.push(
      r.proxy.reachable
        ? { text: `✓ proxy ${r.proxy.name} answers HTTP`, ok: true }
        : { text: `✗ proxy ${r.proxy.name}: ${r.proxy.detail ?? 'unreachable'}`, ok: false },
    );
  }
  return lines;
}

export class ConnectionView {
  private report: ConnectionReport | undefined;
  private running = false;
  private readonly lines: HTMLDivElement;
  private readonly button: HTMLButtonElement;

  constructor(
    private readonly box: HTMLElement,
    private state: SettingsState,
  ) {
    this.lines = document.createElement('div');
    this.lines.className = 'connection-lines';
    this.button = document.createElement('button');
    this.button.type = 'button';
    this.button.id = 'test-connection';
    this.button.textContent = 'Test connection';
    this.button.addEventListener('click', () => void this.test());
    box.replaceChildren(this.lines, this.button);
    this.render();
  }

  setState(state: SettingsState): void {
    const changed = state.settings.origoUrl !== this.state.settings.origoUrl;
    this.state = state;
    if (changed) this.report = undefined;
    this.render();
  }

  /** Runs the check with the current settings (one at a time); resolves when it is shown. */
  async test(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.render();
    try {
      this.report = await checkConnection(this.state.settings, {
        webSocket: openWebSocket,
        clock: systemClock,
        fetchNoCors: (url, signal) => fetch(url, { mode: 'no-cors', credentials: 'omit', cache: 'no-store', signal }),
        wallNow: () => Date.now(),
      });
    } finally {
      this.running = false;
      this.render();
    }
  }

  private render(): void {
    const source = origoSourceLine(this.state);
    const rows = [line(source.text, source.warn ? 'warn' : 'muted')];
    if (this.running) rows.push(line('checking origo…', 'muted'));
    else if (this.report) for (const l of reportLines(this.report)) rows.push(line(l.text, l.ok ? 'ok' : 'bad'));
    else rows.push(line('not checked yet', 'muted'));
    this.lines.replaceChildren(...rows);
    this.button.disabled = this.running;
    this.box.dataset.state = this.running
      ? 'checking'
      : this.report
        ? this.report.origo === 'reachable'
          ? 'reachable'
          : 'unreachable'
        : 'unchecked';
  }
}
