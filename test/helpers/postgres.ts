// The PostgreSQL starter lives with the bench (which may not import tests); the ledger suites use it from here.
export * from '../../bench/lib/postgres.ts';
