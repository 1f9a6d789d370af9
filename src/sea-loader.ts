// The single executable's entry (the SEA's main script, see build/build.ts): runs the main
// script (src/sea.ts bundled), which travels as an asset with a V8 code cache the build made
// after starting `serve` once. The SEA's own code cache is made before anything runs, so it
// holds little more than the top level: every function that module evaluation and start-up
// call was compiled again at every start.
import { MAIN_ASSETS, runPlainScriptAsset, runScriptAsset, TEXT_WORKER_ASSET, TEXT_WORKER_ENV } from './sea-chunks.ts';
import { pauseOptimizingTiers } from './startup-tiers.ts';

// The SEA's require (Node's built-in modules only), as the main script had when it was the entry.
// Started as a text extraction process (src/domain/mail/attachment-text.ts): only the worker runs.
// The main script runs with V8's optimizing compilers off until start-up is over (src/startup-tiers.ts).
if (process.env[TEXT_WORKER_ENV]) runPlainScriptAsset(TEXT_WORKER_ASSET, require);
else runScriptAsset(MAIN_ASSETS, require, pauseOptimizingTiers);
