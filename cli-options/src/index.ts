/**
 * Where a service's option values come from besides flags (origo, the proxy): an environment
 * variable for every option, and `--config <file>`, a JSON object of options under their flag
 * names without the dashes (`{"port": 8700, "proxy-keys": "/etc/mutp/proxy-keys.json"}`).
 * Precedence, as commander records each value's source: flags > environment > file > defaults.
 */
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import { z } from 'zod';
import { exitTwoOnUsageErrors } from './usage';

export { EXIT_USAGE, exitTwoOnUsageErrors } from './usage';
export { isLoopbackHost, localDevRefusal } from './local-dev';
export { secretsEqual } from './secrets';

/**
 * A command whose options without an environment variable get `<prefix><FLAG_NAME>`
 * (--max-clients: MUTP_ORIGO_MAX_CLIENTS), and whose usage errors exit 2 (`exitTwoOnUsageErrors`).
 */
export class CommandWithEnv extends Command {
  constructor(private readonly envPrefix: string) {
    super();
    exitTwoOnUsageErrors(this);
  }

  override addOption(option: Option): this {
    // Before registering: commander listens for an option's variable only when it has one then.
    if (option.envVar === undefined && option.long !== undefined) {
      option.env(this.envPrefix + option.long.slice(2).toUpperCase().replace(/-/g, '_'));
    }
    return super.addOption(option);
  }
}

/** Options the file cannot set: its own path. */
const NOT_IN_FILE = new Set(['config']);

const scalar = z.union([z.string(), z.number()]);
const value = z.union([scalar, z.array(scalar)], { message: 'expected a string, a number or a list of them' });

/**
 * Fills every option not given by a flag or the environment from the JSON file at `path`. Each
 * value goes through the flag's own parser (a list is joined with commas), so the file accepts
 * exactly what the flag does. A bad file, an unknown key or a bad value exits through
 * `command.error` (exit code 2), naming the key but never a value: a secret put under the wrong
 * key, or a file that is not JSON, must not end up in a terminal's scrollback or a unit's log.
 */
export function applyConfigFile(command: Command, path: string | undefined): void {
  if (path === undefined || path === '') return;
  const fail = (message: string): never => command.error(`error: --config ${path}: ${message}`, { exitCode: 2 });
  let json: unknown;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return fail((err as Error).message);
  }
  try {
    json = JSON.parse(text);
  } catch (err) {
    // V8 quotes the text around the error: say where, not what.
    const at = /position (\d+)/.exec((err as Error).message);
    return fail(`not valid JSON${at ? ` (at character ${at[1]})` : ''}`);
  }
  const options = new Map<string, Option>();
  for (const option of command.options) {
    const key = option.long?.slice(2);
    if (key !== undefined && !NOT_IN_FILE.has(key)) options.set(key, option);
  }
  const shape = Object.fromEntries(
    [...options].map(([key, option]) => [
      key,
      (option.isBoolean() ? z.boolean({ message: 'expected true or false' }) : value).optional(),
    ]),
  );
  const parsed = z.object(shape, { message: 'expected a JSON object of options' }).strict().safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    if (issue.code === 'unrecognized_keys') {
      return fail(`unknown key ${issue.keys.map((k) => `"${k}"`).join(', ')}: not an option (see --help)`);
    }
    return fail(issue.path.length > 0 ? `"${issue.path.join('.')}": ${issue.message}` : issue.message);
  }
  for (const [key, given] of Object.entries(parsed.data)) {
    if (given === undefined) continue;
    const option = options.get(key)!;
    const name = option.attributeName();
    const source = command.getOptionValueSource(name);
    if (source === 'cli' || source === 'env') continue;
    let result: unknown = given;
    if (typeof given !== 'boolean') {
      const raw = Array.isArray(given) ? given.join(',') : String(given);
      try {
        result = option.parseArg ? option.parseArg(raw, undefined) : raw;
      } catch (err) {
        if (!(err instanceof InvalidArgumentError)) throw err;
        return fail(`"${key}": ${redact(err.message, raw)}`);
      }
    }
    command.setOptionValueWithSource(name, result, 'config');
  }
}

/** A parser's message without the value it quotes (a secret under the wrong key would be shown). */
function redact(message: string, value: string): string {
  if (value === '') return message;
  return message.split(JSON.stringify(value)).join('the value').split(value).join('the value');
}

export { byteCount, integer } from './parsers';
