// Runs SQL with DuckDB on a `cptrace export table` directory and prints the
// result as JSON (an array of row objects) on stdout.
//
//   node tools/duckdb/query.mjs EXPORT_DIR 'SELECT ...'
//   node tools/duckdb/query.mjs EXPORT_DIR tools/duckdb/examples/hop_p99.sql
//
// The query sees two views, `events` and `latency` (events.csv.zst,
// latency.csv.zst, read compressed as they are; or events.csv, latency.csv of an
// `export table --plain`), with the column types of docs/analysis-export.md
// given explicitly, so nothing depends on DuckDB's type sniffing. Integers print
// as JSON numbers when a double holds them exactly, otherwise as strings (tuple
// ids up to 2^64 - 1).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';

const EVENTS = {
  node: 'VARCHAR', reference: 'BOOLEAN', kind: 'VARCHAR', channel: 'VARCHAR', channel_id: 'VARCHAR',
  tuple: 'UBIGINT', pid: 'UINTEGER', tid: 'UINTEGER', cpu: 'USMALLINT', local_ts: 'UBIGINT',
  ref_ts: 'BIGINT', ref_lo: 'BIGINT', ref_hi: 'BIGINT', time_ns: 'BIGINT', time_lo_ns: 'BIGINT', time_hi_ns: 'BIGINT',
};
const LATENCY = {
  from_channel: 'VARCHAR', to_channel: 'VARCHAR', tuple: 'UBIGINT', from_node: 'VARCHAR', to_node: 'VARCHAR',
  scenario: 'VARCHAR', remote: 'BOOLEAN', from_ref_ts: 'BIGINT', ticks: 'BIGINT', ticks_lo: 'BIGINT',
  ticks_hi: 'BIGINT', ns: 'BIGINT', ns_lo: 'BIGINT', ns_hi: 'BIGINT',
};

function fail(msg) {
  process.stderr.write(`query.mjs: ${msg}\n`);
  process.exit(1);
}

const sqlString = (s) => `'${s.replaceAll("'", "''")}'`;
function view(name, file, columns) {
  const cols = Object.entries(columns).map(([c, t]) => `${sqlString(c)}: ${sqlString(t)}`).join(', ');
  return `CREATE VIEW ${name} AS SELECT * FROM read_csv(${sqlString(file)}, header = true, ` +
    `columns = {${cols}}, nullstr = '', quote = '"', escape = '"');`;
}

// A table's file: compressed (the default of export table), else plain; read_csv
// decompresses a .zst by its extension.
function table(dir, name) {
  for (const file of [`${name}.csv.zst`, `${name}.csv`]) if (existsSync(join(dir, file))) return join(dir, file);
  return null;
}

const [dir, query] = process.argv.slice(2);
if (!dir || !query) fail('usage: query.mjs EXPORT_DIR (SQL | FILE.sql)');
const events = table(dir, 'events'), latency = table(dir, 'latency');
if (!events) fail(`${dir}: no events.csv.zst or events.csv (not the output of cptrace export table)`);
const sql = query.endsWith('.sql') ? readFileSync(query, 'utf8') : query;

const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
await con.run(view('events', events, EVENTS));
if (latency) await con.run(view('latency', latency, LATENCY));
let rows;
try {
  rows = (await con.runAndReadAll(sql)).getRowObjectsJS();
} catch (e) {
  fail(e.message);
}
const json = (k, v) => (typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v);
process.stdout.write(JSON.stringify(rows, json, 2) + '\n');
