/** The options page: a form over the settings in storage.local. */
import { ext, loadSettings } from '../common/ext';
import { DEFAULT_SETTINGS, normalizeSettings, origoUrlProblem, Settings, SETTINGS_KEY } from '../common/settings';

const MIB = 1024 * 1024;
const form = document.getElementById('form') as HTMLFormElement;
const status = document.getElementById('status') as HTMLElement;

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
  ext()
    .storage.local.set({ [SETTINGS_KEY]: settings })
    .then(() => {
      fill(settings);
      show('Saved.');
    })
    .catch((e: unknown) => show(`Not saved: ${String(e)}`, true));
});

document.getElementById('defaults')!.addEventListener('click', () => {
  fill({ ...DEFAULT_SETTINGS, disabledSites: [], urlPatterns: [...DEFAULT_SETTINGS.urlPatterns] });
  show('Defaults restored in the form: save to keep them.');
});

ext().storage.onChanged.addListener((changes, area) => {
  if (area === 'local' && changes[SETTINGS_KEY]) fill(normalizeSettings(changes[SETTINGS_KEY].newValue));
});

loadSettings()
  .then(fill)
  .then(() => document.body.setAttribute('data-ready', '1'))
  .catch((e: unknown) => show(`Cannot read the settings: ${String(e)}`, true));
