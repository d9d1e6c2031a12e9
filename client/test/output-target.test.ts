import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileNameOf, planOutput, stdoutProblem } from '../src/output-target';
import { parseInputList, urlProblem } from '../src/input-list';
import { parseChecksum } from '../src/checksum';
import { formatEta } from '../src/progress-display';

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'mutp-out-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const choice = { continue: false, allowOverwrite: false };

test("the URL's base name, decoded, never a path out of the directory or a hidden file", () => {
  expect(fileNameOf('https://cdn.example/v/seg%201.ts?token=abc')).toBe('seg 1.ts');
  expect(fileNameOf('https://cdn.example/')).toBe('index.html');
  expect(fileNameOf('https://cdn.example/a/..%2F..%2Fetc%2Fpasswd')).toBe('_.._etc_passwd');
  expect(fileNameOf('https://cdn.example/.bashrc')).toBe('bashrc');
  expect(fileNameOf('https://cdn.example/%E0%A4%A')).toBe('%E0%A4%A');
});

test('-d and -o place the file; missing directories are made before the download', () => {
  expect(planOutput('https://o.example/a/b.mp4', { ...choice, dir })).toEqual({
    file: join(dir, 'b.mp4'),
    resume: false,
  });
  expect(planOutput('https://o.example/b.mp4', { ...choice, dir, output: 'new/c.mp4' })).toEqual({
    file: join(dir, 'new', 'c.mp4'),
    resume: false,
  });
});

test('an existing file, an interrupted download or a path through a file: refused before the download', () => {
  writeFileSync(join(dir, 'b.mp4'), 'x');
  expect(() => planOutput('https://o.example/b.mp4', { ...choice, dir })).toThrow(/exists: .*--allow-overwrite/);
  expect(planOutput('https://o.example/b.mp4', { ...choice, dir, allowOverwrite: true }).resume).toBe(false);
  // -c with the file there and nothing interrupted: it is complete (as wget -c).
  expect(planOutput('https://o.example/b.mp4', { ...choice, dir, continue: true })).toEqual({
    file: join(dir, 'b.mp4'),
    complete: true,
  });
  writeFileSync(join(dir, 'c.mp4.part'), 'x');
  writeFileSync(join(dir, 'c.mp4.mutp'), '{}');
  expect(() => planOutput('https://o.example/c.mp4', { ...choice, dir })).toThrow(/interrupted download .*-c/);
  expect(planOutput('https://o.example/c.mp4', { ...choice, dir, continue: true }).resume).toBe(true);
  expect(() => planOutput('https://o.example/b.mp4', { ...choice, dir, output: 'b.mp4/x' })).toThrow(
    /cannot create the directory/,
  );
  mkdirSync(join(dir, 'd.mp4'));
  expect(() => planOutput('https://o.example/d.mp4', { ...choice, dir })).toThrow(/is a directory/);
});

test('URLs must be absolute http(s) with a host', () => {
  expect(urlProblem('http://')).toMatch(/not a URL/);
  expect(urlProblem('ftp://o.example/x')).toMatch(/not an http\(s\) URL/);
  expect(urlProblem('https://o.example/x')).toBeUndefined();
});

test("an input file in aria2's form: URLs, comments, out= and checksum= under a URL", () => {
  const hex = 'ab'.repeat(32);
  const text = `# videos\nhttps://o.example/1.mp4\n  out=first.mp4\n  checksum=sha-256=${hex.toUpperCase()}\n\nhttps://o.example/2.mp4\n`;
  expect(parseInputList(text, 'list.txt')).toEqual([
    { url: 'https://o.example/1.mp4', out: 'first.mp4', checksum: { algorithm: 'sha-256', hex } },
    { url: 'https://o.example/2.mp4' },
  ]);
  expect(() => parseInputList('  out=x\n', 'l')).toThrow(/l:1: an option line before any URL/);
  expect(() => parseInputList('https://o.example/1\n  split=4\n', 'l')).toThrow(/l:2: unknown option line "split=4"/);
  expect(() => parseInputList('ftp://x/y\n', 'l')).toThrow(/l:1: not an http/);
  expect(() => parseInputList('# nothing\n', 'l')).toThrow(/no URL/);
  expect(() => parseChecksum('md5=abc')).toThrow(/expected sha-256=/);
});

test('ETA reads as a person says it', () => {
  expect([formatEta(0.4), formatEta(45), formatEta(185), formatEta(7620)]).toEqual(['0s', '45s', '3m05s', '2h07m']);
});

test('-o - (stdout): one download, not resumable, no -d, no --json on the same stdout', () => {
  const base = { continue: false, allowOverwrite: false, downloads: 1, json: false };
  expect(stdoutProblem(base)).toBeUndefined();
  expect(stdoutProblem({ ...base, allowOverwrite: true })).toBeUndefined();
  expect(stdoutProblem({ ...base, downloads: 2 })).toMatch(/give one URL/);
  expect(stdoutProblem({ ...base, continue: true })).toMatch(/cannot be resumed/);
  expect(stdoutProblem({ ...base, dir: '/tmp' })).toMatch(/-d has no use/);
  expect(stdoutProblem({ ...base, json: true })).toMatch(/--json prints to stdout/);
});
