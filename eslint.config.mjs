import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

/**
 * What each workspace may import of ours: README.md's import table, enforced. A package is
 * reached only through its name and its `exports` map, never by a relative path into another
 * workspace (import-x/no-relative-packages) or a path inside it (the exports maps refuse those).
 */
const MAY_IMPORT = {
  shared: [],
  'node-rtc': ['shared'],
  wasm: ['shared'],
  sim: ['shared', 'wasm'],
  origo: ['shared'],
  proxy: ['shared', 'wasm', 'node-rtc'],
  client: ['shared', 'wasm', 'node-rtc'],
  extension: ['shared', 'wasm'],
  testing: [],
};

/** Node built-ins: the protocol core and the client orchestration also run in browsers. */
const NODE_BUILTINS = ['node:*', 'fs', 'path', 'crypto', 'os', 'net', 'http', 'https', 'child_process'];

function workspaceRule(workspace, allowed, extraPatterns = []) {
  // A package may also name itself (its tests and benchmarks import it as users do).
  const ours = `(?!(${[workspace, ...allowed].join('|')})(/|$))`;
  const message =
    allowed.length === 0
      ? `${workspace}/ imports nothing of ours (README.md, Architecture).`
      : `${workspace}/ may import only ${allowed.map((a) => `@mutp/${a}`).join(', ')} (README.md, Architecture).`;
  return {
    files: [`${workspace}/**/*.ts`],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: `^@mutp/${ours}`, message }, ...extraPatterns] }],
    },
  };
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
  {
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      'import-x/no-relative-packages': 'error',
      // Modules import what sits beside or below them; a cycle means a type is one level too high.
      'import-x/no-cycle': 'error',
    },
  },
  ...Object.entries(MAY_IMPORT).map(([workspace, allowed]) => workspaceRule(workspace, allowed)),
  // Tests and benchmarks may also use the shared test tooling; a service's src never does.
  ...Object.entries(MAY_IMPORT).map(([workspace, allowed]) => ({
    ...workspaceRule(workspace, [...allowed, 'testing']),
    files: [`${workspace}/test/**/*.ts`, `${workspace}/bench/**/*.ts`],
  })),
  {
    // The sans-IO core: no Node built-ins, and nothing of the client orchestration layered on it.
    ...workspaceRule(
      'shared',
      [],
      [
        { group: NODE_BUILTINS, message: 'The protocol core runs in browsers and Node alike: no Node built-ins.' },
        {
          regex: '^(\\.\\.?/)+client(/|$)',
          message: 'The core does not import the client orchestration (@mutp/shared/client is layered on it).',
        },
      ],
    ),
    files: ['shared/src/**/*.ts'],
    ignores: ['shared/src/client/**'],
  },
  {
    ...workspaceRule(
      'shared',
      [],
      [
        {
          group: NODE_BUILTINS,
          message: 'The client orchestration runs in browsers and Node alike: no Node built-ins.',
        },
      ],
    ),
    files: ['shared/src/client/**/*.ts'],
  },
);
