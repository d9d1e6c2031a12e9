// Builds the extension from one source into dist/chrome (Chromium MV3) and dist/firefox (Firefox
// MV3), and packs dist/mutp-chrome.zip and dist/mutp-firefox.zip. One compilation: the bundles
// are the same for both browsers, only manifest.json differs (see manifest() below).
//
//   npm run build -w extension        (production, source maps)
//   npm run build:dev -w extension    (development)
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, cpSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import CopyPlugin from 'copy-webpack-plugin';
import compilerWebpack from 'webpack';
import { zipSync } from 'fflate';
import { iconFiles, iconManifest } from './build/icons.mjs';

const here = import.meta.dirname;
const dist = join(here, 'dist');
const chromeDir = join(dist, 'chrome');
const firefoxDir = join(dist, 'firefox');
const wasmDist = join(here, '..', 'wasm', 'dist');
const WASM_FILES = ['mutp-rlnc-simd.wasm', 'mutp-rlnc-scalar.wasm', 'mutp-wirehair.wasm'];
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));

/** The manifest for one browser. */
export function manifest(browser) {
  const m = {
    manifest_version: 3,
    name: 'MUTP multi-source video',
    short_name: 'MUTP',
    version: pkg.version,
    description:
      'Fetches the media segments a page plays from several nearby edge proxies at once (MUTP over WebRTC, with network coding); falls back to the network silently.',
    // No host permissions: content scripts need none to run, the downloader reaches origo by
    // WebSocket and the proxies' HTTP endpoint by CORS, and the consent check must run with the
    // page's CORS, not past it.
    // activeTab: the popup, opened by the user on a tab, may read that tab's URL (per-site switch).
    permissions: ['storage', 'activeTab'],
    background: { service_worker: 'background.js' },
    content_scripts: [
      {
        matches: ['<all_urls>'],
        js: ['hook.js'],
        run_at: 'document_start',
        all_frames: true,
        world: 'MAIN',
      },
      {
        matches: ['<all_urls>'],
        js: ['content.js'],
        run_at: 'document_start',
        all_frames: true,
      },
    ],
    // The frame must be loadable in pages; it accepts a port only with a token (see src/downloader/main.ts).
    // hook.js runs as a MAIN-world content script (Chrome 111+, Firefox 128+) and needs no access.
    web_accessible_resources: [{ resources: ['downloader.html'], matches: ['<all_urls>'] }],
    icons: iconManifest(),
    action: { default_title: 'MUTP', default_popup: 'popup.html', default_icon: iconManifest() },
    options_ui: { page: 'options.html', open_in_tab: true },
    content_security_policy: {
      extension_pages: "script-src 'self' 'wasm-unsafe-eval'; object-src 'self'",
    },
  };
  if (browser === 'chrome') {
    m.minimum_chrome_version = '111'; // content_scripts[].world
    // What an administrator may set by policy (chrome.storage.managed); Firefox takes the same
    // keys from its enterprise policies (3rdparty) without a schema.
    m.storage = { managed_schema: 'managed-schema.json' };
  } else {
    // Firefox runs MV3 backgrounds as event pages (scripts); it ignores service_worker (web-ext lint warns).
    m.background = { scripts: ['background.js'] };
    m.browser_specific_settings = {
      gecko: {
        id: 'mutp-extension@mutp.invalid',
        // 140: data_collection_permissions (content_scripts[].world needs 128); 140 is an ESR.
        strict_min_version: '140.0',
        // Firefox 140+ asks at install: the media URLs a page plays go to origo (download records,
        // origin + path) and to the proxies (which fetch them).
        data_collection_permissions: { required: ['browsingActivity'] },
      },
      gecko_android: { strict_min_version: '142.0' },
    };
  }
  return m;
}

function filesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out;
}

/** Zips `dir` (source maps left out) into `zipPath`. */
function zipDir(dir, zipPath) {
  const files = {};
  for (const path of filesUnder(dir).sort()) {
    if (path.endsWith('.map')) continue;
    files[relative(dir, path).split(sep).join('/')] = [readFileSync(path), { mtime: new Date('2026-01-01T00:00:00Z') }];
  }
  writeFileSync(zipPath, zipSync(files, { level: 9 }));
}

/** Writes both manifests, the Firefox copy of the build, and the two zip packages. */
class PackagePlugin {
  apply(compiler) {
    const { RawSource } = compiler.webpack.sources;
    compiler.hooks.thisCompilation.tap('mutp-package', (compilation) => {
      compilation.hooks.processAssets.tap(
        { name: 'mutp-package', stage: compiler.webpack.Compilation.PROCESS_ASSETS_STAGE_ADDITIONAL },
        () => {
          compilation.emitAsset('manifest.json', new RawSource(`${JSON.stringify(manifest('chrome'), null, 2)}\n`));
          for (const [name, bytes] of Object.entries(iconFiles())) compilation.emitAsset(name, new RawSource(bytes));
        },
      );
    });
    compiler.hooks.afterEmit.tap('mutp-package', () => {
      rmSync(firefoxDir, { recursive: true, force: true });
      cpSync(chromeDir, firefoxDir, { recursive: true });
      writeFileSync(join(firefoxDir, 'manifest.json'), `${JSON.stringify(manifest('firefox'), null, 2)}\n`);
      zipDir(chromeDir, join(dist, 'mutp-chrome.zip'));
      zipDir(firefoxDir, join(dist, 'mutp-firefox.zip'));
    });
  }
}

export default (_env, argv) => {
  const missing = WASM_FILES.filter((f) => !existsSync(join(wasmDist, f)));
  if (missing.length > 0) {
    throw new Error(`wasm/dist lacks ${missing.join(', ')}: build the codecs first (bash wasm/build.sh)`);
  }
  mkdirSync(dist, { recursive: true });
  const production = (argv?.mode ?? 'production') === 'production';
  return {
    mode: production ? 'production' : 'development',
    context: here,
    target: ['web', 'es2022'],
    devtool: false, // source maps for the scripts only (below), not for copied files
    entry: {
      hook: './src/hook/main.ts',
      content: './src/content/main.ts',
      downloader: './src/downloader/main.ts',
      background: './src/background/main.ts',
      options: './src/options/main.ts',
      popup: './src/popup/main.ts',
    },
    output: {
      path: chromeDir,
      filename: '[name].js',
      publicPath: '',
      globalObject: 'globalThis',
      clean: true,
    },
    resolve: { extensions: ['.ts', '.js'] },
    module: {
      rules: [
        // zod's eval probe, answered without the Function constructor (see the loader).
        { test: /[\\/]zod[\\/]v4[\\/]core[\\/]util\.js$/, loader: join(here, 'build', 'no-eval-probe.cjs') },
        {
          test: /\.ts$/,
          exclude: /node_modules/,
          loader: 'ts-loader',
          options: { transpileOnly: true, configFile: join(here, 'tsconfig.json') },
        },
      ],
    },
    optimization: { splitChunks: false, runtimeChunk: false },
    performance: { hints: false },
    plugins: [
      new CopyPlugin({
        patterns: [
          { from: 'static', to: '.', globOptions: { ignore: ['**/preset-settings.json'] } },
          ...WASM_FILES.map((f) => ({ from: join(wasmDist, f), to: `wasm/${f}` })),
          { from: join(here, '..', 'wasm', 'THIRD_PARTY_NOTICES.md'), to: 'THIRD_PARTY_NOTICES.md' },
          // Settings applied on install (empty: none). Test harnesses overwrite it in a copy.
          { from: 'static/preset-settings.json', to: 'preset-settings.json' },
        ],
      }),
      new compilerWebpack.SourceMapDevToolPlugin({ test: /\.js$/, filename: '[file].map' }),
      new PackagePlugin(),
    ],
    stats: 'errors-warnings',
  };
};
