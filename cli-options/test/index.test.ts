/** Option sources: an environment variable for every flag, the --config file, and their precedence. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidArgumentError, Option } from 'commander';
import { applyConfigFile, CommandWithEnv } from '../src';

let dir: string;
beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'cli-options-'))));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function positive(text: string): number {
  const n = Number(text);
  // Quotes the value, as the services' parsers do (the file loader must not pass it on).
  if (!Number.isInteger(n) || n <= 0)
    throw new InvalidArgumentError(`expected a positive integer, not ${JSON.stringify(text)}`);
  return n;
}

/** A command like the services' (errors thrown, not exiting), parsed with `argv`, `env` and the file `json`. */
function parse(argv: string[], env: Record<string, string>, json?: unknown): Record<string, unknown> {
  const command = new CommandWithEnv('MUTP_TEST_')
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, writeOut: () => undefined })
    .addOption(new Option('--config <file>'))
    .addOption(new Option('--port <n>').argParser(positive).default(8700))
    .addOption(new Option('--host <address>').default('127.0.0.1'))
    .addOption(new Option('--origo <urls>'))
    .addOption(new Option('--insecure'));
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const file = join(dir, 'options.json');
    if (json !== undefined) writeFileSync(file, typeof json === 'string' ? json : JSON.stringify(json));
    command.parse(['node', 'service', ...argv, ...(json !== undefined ? ['--config', file] : [])]);
    applyConfigFile(command, command.opts<{ config?: string }>().config);
    return command.opts();
  } finally {
    process.env = saved;
  }
}

test('every option gets an environment variable named after its flag', () => {
  expect(parse([], { MUTP_TEST_PORT: '9000', MUTP_TEST_HOST: '0.0.0.0' })).toMatchObject({
    port: 9000,
    host: '0.0.0.0',
  });
});

test('flags win over the environment, which wins over the file, which wins over defaults', () => {
  const file = { port: 7000, host: '10.0.0.1', origo: ['wss://a/v1/proxy', 'wss://b/v1/proxy'], insecure: true };
  expect(parse([], {}, file)).toMatchObject({
    port: 7000,
    host: '10.0.0.1',
    origo: 'wss://a/v1/proxy,wss://b/v1/proxy',
    insecure: true,
  });
  expect(parse([], { MUTP_TEST_PORT: '7100' }, file)).toMatchObject({ port: 7100, host: '10.0.0.1' });
  expect(parse(['--port', '7200'], { MUTP_TEST_PORT: '7100' }, file)).toMatchObject({ port: 7200 });
  expect(parse([], {}, {})).toMatchObject({ port: 8700, host: '127.0.0.1' });
});

test('a bad file, an unknown key or a bad value is refused, naming it', () => {
  expect(() => parse([], {}, { prot: 1 })).toThrow(/unknown key "prot": not an option/);
  expect(() => parse([], {}, { port: -1 })).toThrow(/"port": expected a positive integer, not the value/);
  expect(() => parse([], {}, { insecure: 'yes' })).toThrow(/"insecure": expected true or false/);
  expect(() => parse([], {}, { config: 'other.json' })).toThrow(/unknown key "config"/);
  expect(() => parse([], {}, '{ not json')).toThrow(/--config .*options\.json/);
  expect(() => parse([], {}, [1, 2])).toThrow(/expected a JSON object of options/);
});

test('errors name the key, never the value: a secret under the wrong key or a broken file stays out of logs', () => {
  const error = (json: unknown) => {
    try {
      parse([], {}, json);
    } catch (e) {
      return (e as Error).message;
    }
    throw new Error('expected the file to be refused');
  };
  const misplaced = error({ port: 'hunter2-secret' });
  expect(misplaced).toContain('"port"');
  expect(misplaced).not.toContain('hunter2');
  const broken = error('{"secret-key": hunter2-secret}');
  expect(broken).toMatch(/not valid JSON/);
  expect(broken).not.toContain('hunter2');
  expect(error('{"port": 1,}')).toMatch(/not valid JSON \(at character \d+\)/);
});
