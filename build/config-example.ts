// Writes config.example.toml from the config schema (every key, default and description).
// Run with `npm run config:example` after adding a key; a test fails if the file is stale.
import { writeFileSync } from 'node:fs';
import { renderExampleConfig } from '../src/config.ts';

writeFileSync(new URL('../config.example.toml', import.meta.url), renderExampleConfig());
