/**
 * A private PostgreSQL cluster for tests and benchmarks: `initdb` into a fresh temp directory, the
 * server on a free loopback port with its unix socket in that directory, trust authentication,
 * no fsync. PostgreSQL refuses to run as root, so as root every server command runs as the
 * `postgres` OS user (`runuser`) and the directory is handed to that user. `kill()` / `start()`
 * / `restart()` stop and start the server on the same port (an outage origo must survive);
 * `pause()` freezes it (a hung server: connections open but nothing answers). scripts/setup.sh
 * installs the Debian package `postgresql`; its server binaries are in
 * /usr/lib/postgresql/<version>/bin (or set MUTP_PG_BIN).
 */
import { execFile, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports';

export interface PostgresServer {
  /** The superuser `postgres` on the default database `postgres`, over TCP on loopback. */
  readonly url: string;
  readonly port: number;
  /** Creates an empty database in this cluster and returns its URL (one per test keeps tests apart). */
  createDatabase(name?: string): Promise<string>;
  /** Stops the server at once (`pg_ctl stop -m immediate`: no checkpoint, as a crash); the port stays its own. */
  kill(): Promise<void>;
  /** Starts it again after kill(), on the same port, with its data. */
  start(): Promise<void>;
  /** kill() then start(). */
  restart(): Promise<void>;
  /** Freezes every server process (SIGSTOP): connections are accepted by the kernel, nothing answers (Linux). */
  pause(): void;
  /** Lets a paused server run again. */
  resume(): void;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

const COMMAND_TIMEOUT_MS = 60_000;

/** The directory of initdb, pg_ctl and psql: MUTP_PG_BIN, else the newest Debian version, else pg_config's. */
export function postgresBinDir(): string {
  const candidates: string[] = [];
  if (process.env.MUTP_PG_BIN) candidates.push(process.env.MUTP_PG_BIN);
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((v) => /^\d+(\.\d+)?$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(debian, v, 'bin')));
  }
  const pgConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (pgConfig.status === 0) candidates.push(pgConfig.stdout.trim());
  const found = candidates.find((dir) => ['initdb', 'pg_ctl', 'psql'].every((b) => existsSync(join(dir, b))));
  if (found === undefined) {
    throw new Error(
      'PostgreSQL server binaries (initdb, pg_ctl, psql) not found in /usr/lib/postgresql/<version>/bin: ' +
        'install the Debian package postgresql (scripts/setup.sh does), or set MUTP_PG_BIN to their directory',
    );
  }
  return found;
}

/** uid and gid of the `postgres` OS user (needed only as root). */
function postgresUser(): { uid: number; gid: number } {
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error(
      'running as root, and PostgreSQL refuses root: the OS user postgres is missing (the Debian package postgresql creates it)',
    );
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** Runs a command (as postgres when we are root); rejects with its output when it fails. */
function run(asPostgres: boolean, file: string, args: string[]): Promise<string> {
  const [command, argv] = asPostgres ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args];
  return new Promise((resolve, reject) => {
    execFile(command, argv, { encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

/** Servers not yet stopped: a test process that exits without stop() still takes them down. */
const live = new Set<() => void>();
process.once('exit', () => {
  for (const stopNow of live) stopNow();
});

export async function startPostgres(): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? postgresUser() : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'mutp-pg-'));
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const port = await freePort();
  const tool = (name: string) => join(bin, name);
  const logTail = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-2000) : '');
  let paused = false;
  let databases = 0;

  const stopSync = () => {
    if (paused) {
      try {
        signalServer('SIGCONT');
      } catch {
        // gone already
      }
    }
    const argv = ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop'];
    const [command, args] = asRoot
      ? ['runuser', ['-u', 'postgres', '--', tool('pg_ctl'), ...argv]]
      : [tool('pg_ctl'), argv];
    spawnSync(command, args, { stdio: 'ignore', timeout: COMMAND_TIMEOUT_MS });
    rmSync(dir, { recursive: true, force: true });
  };
  live.add(stopSync);

  /**
   * Signals the postmaster and its children (each backend is in a session of its own, so not
   * through a process group): read from postmaster.pid and /proc.
   */
  function signalServer(signal: NodeJS.Signals): void {
    const pidFile = join(data, 'postmaster.pid');
    if (!existsSync(pidFile)) throw new Error('postgres is not running (no postmaster.pid)');
    const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    const children = readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
          // "pid (comm) state ppid ...": comm may hold spaces, so count from its closing parenthesis.
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
        } catch {
          return false; // exited meanwhile
        }
      })
      .map(Number);
    for (const pid of [postmaster, ...children]) {
      try {
        process.kill(pid, signal);
      } catch {
        // exited meanwhile
      }
    }
  }

  try {
    if (user !== undefined) chownSync(dir, user.uid, user.gid);
    await run(asRoot, tool('initdb'), [
      '-D',
      data,
      '-U',
      'postgres',
      '--auth=trust',
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
    ]);
    // Loopback only, the socket in our directory (not /var/run/postgresql), no fsync (the data
    // need not survive a machine crash, and fsync is the slow part). synchronous_commit stays on:
    // a commit must survive kill() (an immediate stop) as it would a real server's crash.
    appendFileSync(
      join(data, 'postgresql.conf'),
      [
        `port = ${port}`,
        `listen_addresses = '127.0.0.1'`,
        `unix_socket_directories = '${dir}'`,
        'fsync = off',
        'full_page_writes = off',
        'shared_buffers = 16MB',
        'max_connections = 50',
        '',
      ].join('\n'),
    );
  } catch (err) {
    live.delete(stopSync);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  const start = async () => {
    try {
      await run(asRoot, tool('pg_ctl'), ['-D', data, '-l', logFile, '-w', '-t', '30', 'start']);
    } catch (err) {
      throw new Error(`${(err as Error).message}\nserver log:\n${logTail()}`);
    }
  };
  const kill = async () => {
    if (paused) resume();
    if (!existsSync(join(data, 'postmaster.pid'))) return;
    await run(asRoot, tool('pg_ctl'), ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop']);
  };
  const resume = () => {
    if (!paused) return;
    paused = false;
    signalServer('SIGCONT');
  };

  try {
    await start();
  } catch (err) {
    live.delete(stopSync);
    stopSync();
    throw err;
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    async createDatabase(name = `test_${++databases}`) {
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a plain database name: ${name}`);
      await run(false, tool('psql'), ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', url, '-c', `CREATE DATABASE ${name}`]);
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    kill,
    start,
    async restart() {
      await kill();
      await start();
    },
    pause() {
      if (paused) return;
      signalServer('SIGSTOP');
      paused = true;
    },
    resume,
    async stop() {
      if (!live.delete(stopSync)) return;
      await kill().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
