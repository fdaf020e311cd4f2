// The command line every Node test against `nexus serve` takes:
// `node NAME.test.mjs NEXUS_BINARY MODEL_PATH`, and how it skips.
//
//   const { binary, model, skipOrFail } = testArgs('openai_sdk.test.mjs');
//
// A missing argument exits 1 with the usage line. A missing model (or, via
// skipOrFail(why), a missing package) skips with exit 77 outside CI and
// fails (exit 1) under CI=true, where ../shared and the packages must exist.
import { existsSync } from 'node:fs';

export const SKIP = 77;

export function skipOrFail(why) {
  const ci = process.env.CI === 'true';
  console.error(`${ci ? 'FAIL' : 'SKIP'}: ${why}${ci ? ' (CI=true)' : ''}`);
  process.exit(ci ? 1 : SKIP);
}

export function testArgs(script) {
  const [binary, model] = process.argv.slice(2);
  if (!binary || !model) {
    console.error(`usage: node ${script} NEXUS_BINARY MODEL_PATH`);
    process.exit(1);
  }
  if (!existsSync(model)) skipOrFail(`model not found: ${model}`);
  return { binary, model, skipOrFail };
}
