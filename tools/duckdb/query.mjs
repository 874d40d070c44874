// Runs SQL with DuckDB on a `cptrace export table` directory and prints the
// result as JSON (an array of row objects) on stdout.
//
//   node tools/duckdb/query.mjs EXPORT_DIR 'SELECT ...'
//   node tools/duckdb/query.mjs EXPORT_DIR tools/duckdb/examples/hop_p99.sql
//
// The query sees a view per table the directory holds: `events` and `latency`
// (`export table`), or `packets` and `flows` (`netlat --table`), over whichever
// form it holds (tables.mjs): events.parquet, latency.parquet of `cptrace
// export table --parquet` or export-parquet.mjs; else events.csv.zst, latency.csv.zst of `cptrace export
// table`, read compressed as they are; else the .csv of `export table --plain`,
// with the column types of docs/analysis-export.md given explicitly. Integers print
// as JSON numbers when a double holds them exactly, otherwise as strings (tuple
// ids up to 2^64 - 1).
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';
import { COLUMNS, tableFile, tableSource } from './tables.mjs';

function fail(msg) {
  process.stderr.write(`query.mjs: ${msg}\n`);
  process.exit(1);
}

const [dir, query] = process.argv.slice(2);
if (!dir || !query) fail('usage: query.mjs EXPORT_DIR (SQL | FILE.sql)');
const tables = Object.keys(COLUMNS).map((name) => [name, tableFile(dir, name)]).filter(([, file]) => file);
if (!tables.length)
  fail(`${dir}: no events or packets table (.parquet, .csv.zst, .csv): not a cptrace table export`);
const sql = query.endsWith('.sql') ? readFileSync(query, 'utf8') : query;

const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
for (const [name, file] of tables) await con.run(`CREATE VIEW ${name} AS SELECT * FROM ${tableSource(file, name)}`);
let rows;
try {
  rows = (await con.runAndReadAll(sql)).getRowObjectsJS();
} catch (e) {
  fail(e.message);
}
const json = (k, v) => (typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v);
process.stdout.write(JSON.stringify(rows, json, 2) + '\n');
