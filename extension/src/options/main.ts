/**
 * The options page: a form over the user's settings in storage.local. Settings the operator set
 * (storage.managed) are shown locked with their managed value; saving keeps them out of the
 * user's. The connection box checks origo with the saved settings.
 */
import { loadSettingsState, onSettingsChanged, saveSettings } from '../common/ext';
import {
  DEFAULT_SETTINGS,
  mergeSettings,
  normalizeSettings,
  origoUrlProblem,
  Settings,
  SettingsState,
} from '../common/settings';
import { ConnectionView } from '../popup/connection-view';

const MIB = 1024 * 1024;
const form = document.getElementById('form') as HTMLFormElement;
const status = document.getElementById('status') as HTMLElement;
let state: SettingsState = mergeSettings(undefined, undefined);
const connection = new ConnectionView(document.getElementById('connection')!, state);

/** The form fields of each setting (byte sizes are edited in MiB). */
const FIELDS: Partial<Record<keyof Settings, string>> = {
  maxObjectBytes: 'maxObjectMiB',
  rangeCacheBytes: 'rangeCacheMiB',
};
const fieldName = (key: keyof Settings) => FIELDS[key] ?? key;

/** Locks the fields the operator set, with a note, and says so at the top. */
function lock(locked: readonly (keyof Settings)[]): void {
  for (const note of form.querySelectorAll('.locked-note')) note.remove();
  for (const element of form.elements) {
    if (
      element instanceof HTMLInputElement ||
      element instanceof HTMLSelectElement ||
      element instanceof HTMLTextAreaElement
    ) {
      element.disabled = false;
    }
  }
  for (const key of locked) {
    const input = field(fieldName(key));
    if (!input) continue;
    input.disabled = true;
    const note = document.createElement('span');
    note.className = 'locked-note';
    note.textContent = ' (set by your administrator)';
    note.dataset.key = key;
    input.closest('label')?.append(note);
  }
  const notice = document.getElementById('managed')!;
  notice.hidden = locked.length === 0;
  notice.textContent =
    locked.length === 0
      ? ''
      : `Your administrator set ${locked.length === 1 ? 'this setting' : 'these settings'} by policy; they cannot be changed here: ${locked.join(', ')}.`;
}

function applyState(next: SettingsState): void {
  state = next;
  fill(next.settings);
  lock(next.locked);
  connection.setState(next);
}

function field<T extends HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>(name: string): T {
  return form.elements.namedItem(name) as T;
}

function fill(s: Settings): void {
  field<HTMLInputElement>('enabled').checked = s.enabled;
  field<HTMLInputElement>('origoUrl').value = s.origoUrl;
  field<HTMLSelectElement>('mode').value = s.mode;
  field<HTMLSelectElement>('transport').value = s.transport;
  field<HTMLInputElement>('proxies').value = String(s.proxies);
  field<HTMLInputElement>('deadlineMs').value = String(s.deadlineMs);
  field<HTMLInputElement>('maxObjectMiB').value = String(Math.round(s.maxObjectBytes / MIB));
  field<HTMLInputElement>('rangeCacheMiB').value = String(Math.round(s.rangeCacheBytes / MIB));
  field<HTMLInputElement>('concurrency').value = String(s.concurrency);
  field<HTMLInputElement>('staging').checked = s.staging;
  field<HTMLTextAreaElement>('disabledSites').value = s.disabledSites.join('\n');
  field<HTMLTextAreaElement>('urlPatterns').value = s.urlPatterns.join('\n');
  field<HTMLInputElement>('exposeCounters').checked = s.exposeCounters;
}

function read(): { settings: Settings; problems: string[] } {
  const lines = (name: string) =>
    field<HTMLTextAreaElement>(name)
      .value.split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
  const raw = {
    enabled: field<HTMLInputElement>('enabled').checked,
    origoUrl: field<HTMLInputElement>('origoUrl').value.trim(),
    mode: field<HTMLSelectElement>('mode').value,
    transport: field<HTMLSelectElement>('transport').value,
    proxies: Number(field<HTMLInputElement>('proxies').value),
    deadlineMs: Number(field<HTMLInputElement>('deadlineMs').value),
    maxObjectBytes: Number(field<HTMLInputElement>('maxObjectMiB').value) * MIB,
    rangeCacheBytes: Number(field<HTMLInputElement>('rangeCacheMiB').value) * MIB,
    concurrency: Number(field<HTMLInputElement>('concurrency').value),
    staging: field<HTMLInputElement>('staging').checked,
    disabledSites: lines('disabledSites'),
    urlPatterns: lines('urlPatterns'),
    exposeCounters: field<HTMLInputElement>('exposeCounters').checked,
  };
  const settings = normalizeSettings(raw);
  const problems: string[] = [];
  const origoProblem = origoUrlProblem(raw.origoUrl);
  if (origoProblem) problems.push(origoProblem);
  return { settings, problems };
}

function show(text: string, error = false): void {
  status.textContent = text;
  status.classList.toggle('error', error);
}

form.addEventListener('submit', (event) => {
  event.preventDefault();
  const { settings, problems } = read();
  if (problems.length > 0) {
    show(problems.join('; '), true);
    return;
  }
  // Locked settings stay the user's own (not the managed value) in storage.local.
  const patch: Partial<Record<keyof Settings, unknown>> = { ...settings };
  for (const key of state.locked) delete patch[key];
  saveSettings(patch as Partial<Settings>)
    .then(() => loadSettingsState())
    .then((next) => {
      applyState(next);
      show('Saved.');
    })
    .catch((e: unknown) => show(`Not saved: ${String(e)}`, true));
});

document.getElementById('defaults')!.addEventListener('click', () => {
  // Locked fields keep the operator's values.
  fill(
    mergeSettings(
      { ...DEFAULT_SETTINGS, disabledSites: [], urlPatterns: [...DEFAULT_SETTINGS.urlPatterns] },
      pick(state),
    ).settings,
  );
  show('Defaults restored in the form: save to keep them.');
});

/** The managed values of the locked settings. */
function pick(s: SettingsState): Partial<Settings> {
  return Object.fromEntries(s.locked.map((key) => [key, s.settings[key]]));
}

onSettingsChanged(applyState);

loadSettingsState()
  .then(applyState)
  .then(() => document.body.setAttribute('data-ready', '1'))
  .then(() => connection.test())
  .catch((e: unknown) => show(`Cannot read the settings: ${String(e)}`, true));
