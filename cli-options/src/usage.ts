/**
 * The services' exit code for bad usage, as their READMEs document it: an unknown flag, a bad
 * value, a missing argument or a bad `--config` file exit 2. commander exits 1 for its own usage
 * errors, the code the services keep for "cannot start" (a port taken, a database that cannot be
 * opened), so a supervisor could not tell a typo from a busy port.
 */
import type { Command } from 'commander';

export const EXIT_USAGE = 2;

/** Makes every usage error of `command` exit EXIT_USAGE; `--help` still exits 0. Returns `command`. */
export function exitTwoOnUsageErrors<C extends Command>(command: C): C {
  command.exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : EXIT_USAGE));
  return command;
}
