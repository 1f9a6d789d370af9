import { defineConfig } from 'drizzle-kit';

// PostgreSQL migrations, from the PostgreSQL form of the one schema (src/store/schema-pg.ts).
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/store/schema-pg.ts',
  out: './migrations/pg',
});
