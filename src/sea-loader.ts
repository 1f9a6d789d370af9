// The single executable's entry (the SEA's main script, see build/build.ts): runs the main
// script (src/sea.ts bundled), which travels as an asset with a V8 code cache the build made
// after starting `serve` once. The SEA's own code cache is made before anything runs, so it
// holds little more than the top level: every function that module evaluation and start-up
// call was compiled again at every start.
import { MAIN_ASSETS, runScriptAsset } from './sea-chunks.ts';

// The SEA's require (Node's built-in modules only), as the main script had when it was the entry.
runScriptAsset(MAIN_ASSETS, require);
