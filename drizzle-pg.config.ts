import { defineConfig } from 'drizzle-kit';

// PostgreSQL migrations, from the PostgreSQL form of the one schema (src/db/schema-pg.ts).
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema-pg.ts',
  out: './migrations/pg',
});
