// The SDK's compiled ESM for the web chat: assets/web/sdk/ holds tsc's output
// of src/ (the modules index.js imports, nothing else), committed, so that
// building `nexus` (which embeds assets/web/, src/assets/web_assets.cpp)
// needs neither node nor npm on a fresh clone.
//
//   node web-assets.mjs          rebuilds with tsc and writes assets/web/sdk/
//   node web-assets.mjs --check  rebuilds and fails (exit 1) when the
//                                committed copy differs, has a file too many,
//                                or web_assets.cpp does not embed one of them
// (CTest web_sdk_assets_current). Exit 77 when typescript is not installed.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const target = join(here, '../../assets/web/sdk');
const embedder = join(here, '../../src/assets/web_assets.cpp');
const check = process.argv.includes('--check');
const tsc = join(here, 'node_modules/typescript/bin/tsc');
if (!existsSync(tsc)) {
  console.error('typescript is not installed in clients/typescript (run scripts/install-deps.sh)');
  process.exit(process.env.CI === 'true' ? 1 : 77);
}

const out = mkdtempSync(join(tmpdir(), 'nexus-sdk-'));
try {
  execFileSync(process.execPath, [tsc, '-p', join(here, 'tsconfig.json'), '--outDir', out, '--declaration', 'false'],
               { stdio: 'inherit' });
  // index.js and what it imports, transitively (type-only imports are erased).
  const files = new Map();
  const visit = (name) => {
    if (files.has(name)) return;
    const text = readFileSync(join(out, name), 'utf8');
    files.set(name, text);
    for (const m of text.matchAll(/^(?:import|export)\b[^;]*?from '\.\/([\w-]+\.js)';/gms)) visit(m[1]);
  };
  visit('index.js');

  if (!check) {
    rmSync(target, { recursive: true, force: true });
    mkdirSync(target, { recursive: true });
    for (const [name, text] of files) writeFileSync(join(target, name), text);
    console.log(`wrote ${[...files.keys()].join(', ')} to assets/web/sdk/`);
  } else {
    const problems = [];
    const committed = existsSync(target) ? readdirSync(target) : [];
    for (const [name, text] of files) {
      if (!committed.includes(name)) problems.push(`${name}: missing from assets/web/sdk/`);
      else if (readFileSync(join(target, name), 'utf8') !== text) problems.push(`${name}: differs from tsc's output`);
      if (!readFileSync(embedder, 'utf8').includes(`"sdk/${name}"`)) problems.push(`${name}: not embedded by web_assets.cpp`);
    }
    for (const name of committed) if (!files.has(name)) problems.push(`${name}: not part of the SDK's module graph`);
    if (problems.length) {
      console.error(`assets/web/sdk/ is out of date (run: node clients/typescript/web-assets.mjs):\n  ${problems.join('\n  ')}`);
      process.exitCode = 1;
    } else {
      console.log(`assets/web/sdk/ matches tsc's output (${files.size} modules)`);
    }
  }
} finally {
  rmSync(out, { recursive: true, force: true });
}
