import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * What each workspace may import of ours: README.md's import table, enforced. A package is
 * reached only through its name and its `exports` map (which refuses paths inside it), never by
 * a relative path out of its own folder into another workspace.
 */
const MAY_IMPORT = {
  shared: [],
  'node-rtc': ['shared'],
  quic: [],
  wasm: ['shared'],
  sim: ['shared', 'wasm'],
  'cli-options': [],
  'origin-fetch': ['shared'],
  origo: ['shared', 'cli-options', 'origin-fetch'],
  proxy: ['shared', 'wasm', 'node-rtc', 'quic', 'cli-options', 'origin-fetch'],
  client: ['shared', 'wasm', 'node-rtc', 'quic', 'cli-options'],
  extension: ['shared', 'wasm'],
  // Test tooling imports nothing of ours, but for the entries in TESTING_ENTRIES_MAY_IMPORT.
  testing: [],
  // The namespace testbed realises the simulator's network profiles (sim/src/profiles.ts).
  testbed: ['sim'],
  // The whole-system runs use everything, through public entries.
  e2e: null,
};

/**
 * The entries of @mutp/testing that start a service in-process for other workspaces' tests, or
 * build on the core, import it by its public entry: only these files, so the rest of the test
 * tooling stays free of the services. No service's src imports @mutp/testing (the table above).
 */
const TESTING_ENTRIES_MAY_IMPORT = {
  'src/origin.ts': ['shared'],
  'src/origo.ts': ['shared', 'origo'],
  'src/proxy.ts': ['proxy'],
};

/** Node built-ins: the protocol core and the client orchestration also run in browsers. */
const NODE_BUILTINS = ['node:*', 'fs', 'path', 'crypto', 'os', 'net', 'http', 'https', 'child_process'];

/** The core's test-only entry (shared/src/internal.ts), refused in production code. */
const NO_SHARED_INTERNAL = {
  group: ['@mutp/shared/internal'],
  message: 'Production code imports @mutp/shared; @mutp/shared/internal is for tests, benches and fuzz targets.',
};

/**
 * node-datachannel's native threads make a suite over real WebRTC slow to connect beside CPU-bound
 * tests: such a suite is named `*.rtc.test.ts`, and scripts/test.sh runs those one at a time.
 */
const NODE_RTC_ONLY_IN_RTC_SUITES = {
  group: ['@mutp/node-rtc'],
  message: 'A test over real WebRTC is a *.rtc.test.ts suite (scripts/test.sh runs those on their own).',
};

/** Deepest folder level below a workspace's root that the rules below cover. */
const MAX_DEPTH = 8;

/**
 * `no-restricted-imports` for the files `depth` folders below `workspace/` (under `sub`, if given;
 * only the one file `file`, a path below `workspace/`, if given): the import table, no relative
 * path that climbs out of the workspace (`../` once more than the file is deep), and `extra`
 * patterns. One rule, so each file gets every pattern at once.
 */
function importRules(workspace, allowed, { sub = '', file, extra = [], ignores } = {}) {
  const table =
    allowed === null
      ? []
      : [
          {
            // A package may also name itself (its tests and benchmarks import it as users do).
            regex: `^@mutp/(?!(${[workspace, ...allowed].join('|')})(/|$))`,
            message:
              allowed.length === 0
                ? `${workspace}/ imports nothing of ours (README.md, Architecture).`
                : `${workspace}/ may import only ${allowed.map((a) => `@mutp/${a}`).join(', ')} (README.md, Architecture).`,
          },
        ];
  const rulesAt = (files, depth) => ({
    files,
    ...(ignores ? { ignores } : {}),
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...table,
            {
              regex: `^(\\.\\./){${depth + 1}}`,
              message: `a relative import out of ${workspace}/: import the other workspace by its package name.`,
            },
            ...extra,
          ],
        },
      ],
    },
  });
  if (file) return [rulesAt([`${workspace}/${file}`], file.split('/').length - 1)];
  const base = sub ? `${workspace}/${sub}/` : `${workspace}/`;
  const first = sub ? sub.split('/').length : 0;
  const entries = [];
  for (let depth = first; depth <= MAX_DEPTH; depth++) {
    entries.push(rulesAt([`${base}${'*/'.repeat(depth - first)}*.ts`], depth));
  }
  return entries;
}

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      '**/target/**',
      'coverage/**',
      'e2e/results/**',
      'e2e/media/out/**',
      '*.config.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  ...Object.entries(MAY_IMPORT).flatMap(([workspace, allowed]) => importRules(workspace, allowed)),
  // Tests and benchmarks may also use the shared test tooling; a service's src never does.
  ...Object.entries(MAY_IMPORT)
    .filter(([, allowed]) => allowed !== null)
    .flatMap(([workspace, allowed]) => [
      ...importRules(workspace, [...allowed, 'testing'], { sub: 'test' }),
      ...importRules(workspace, [...allowed, 'testing'], { sub: 'bench' }),
    ]),
  // Unit and component tests do not open real WebRTC peers (the .rtc and .browser suites do).
  ...Object.entries(MAY_IMPORT)
    .filter(([, allowed]) => allowed !== null)
    .flatMap(([workspace, allowed]) =>
      importRules(workspace, [...allowed, 'testing'], {
        sub: 'test',
        ignores: ['**/*.rtc.test.ts', '**/*.browser.test.ts'],
        extra: [NODE_RTC_ONLY_IN_RTC_SUITES],
      }),
    ),
  // No src/ file imports @mutp/shared/internal, but e2e's fuzz and bench runners.
  ...Object.entries(MAY_IMPORT).flatMap(([workspace, allowed]) =>
    importRules(workspace, allowed, {
      sub: 'src',
      ignores: ['e2e/src/fuzz*', 'e2e/src/fuzz/**', 'e2e/src/bench-*'],
      extra: [NO_SHARED_INTERNAL],
    }),
  ),
  ...Object.entries(TESTING_ENTRIES_MAY_IMPORT).flatMap(([file, allowed]) =>
    importRules('testing', allowed, { file, extra: [NO_SHARED_INTERNAL] }),
  ),
  // The sans-IO core: no Node built-ins, and nothing of the client orchestration layered on it.
  ...importRules('shared', [], {
    sub: 'src',
    ignores: ['shared/src/client/**'],
    extra: [
      { group: NODE_BUILTINS, message: 'The protocol core runs in browsers and Node alike: no Node built-ins.' },
      {
        regex: '^(\\.\\.?/)+client(/|$)',
        message: 'The core does not import the client orchestration (@mutp/shared/client is layered on it).',
      },
    ],
  }),
  ...importRules('shared', [], {
    sub: 'src/client',
    extra: [
      {
        group: NODE_BUILTINS,
        message: 'The client orchestration runs in browsers and Node alike: no Node built-ins.',
      },
    ],
  }),
);
