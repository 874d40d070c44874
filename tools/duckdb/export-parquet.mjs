// Exports a translated trace as Parquet tables, streamed: cptrace writes one
// table's CSV text into a named pipe (`export table --stdout TABLE`) while
// DuckDB reads the pipe and writes Parquet, so no CSV of the table (about 150
// bytes an event) is ever stored, only the Parquet (0.9-6x the translated
// trace as measured in docs/analysis-export.md).
//
//   node tools/duckdb/export-parquet.mjs TRACE_DIR OUT_DIR [--pair FROM,TO]...
//        [--memory SIZE] [--cptrace PATH] [--accept-suspect-sync] [-f]
//
// OUT_DIR/events.parquet, and with --pair OUT_DIR/latency.parquet: the columns
// and rows of `cptrace export table` (docs/analysis-export.md), zstd-compressed
// with Parquet version 2 encodings. query.mjs reads the directory.
// OUT_DIR is made; an existing non-empty one needs -f, which replaces only the
// tables (any form: .parquet, .csv.zst, .csv). --memory goes to cptrace (the
// latency rows' budget). cptrace: --cptrace, else the build/cptrace of this
// checkout if there is one, else cptrace on PATH.
import { execFileSync, spawn } from 'node:child_process';
import { constants as C, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, closeSync, readdirSync,
  renameSync, rmdirSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { FORMS, sqlString, tableSource } from './tables.mjs';

const USAGE = 'usage: export-parquet.mjs TRACE_DIR OUT_DIR [--pair FROM,TO]... [--memory SIZE] ' +
  '[--cptrace PATH] [--accept-suspect-sync] [-f]';

class Failure extends Error {}
const fail = (msg) => { throw new Failure(msg); };

function parseArgs(argv) {
  const a = { pairs: [], cptraceArgs: [], force: false, positional: [] };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : fail(`${arg} needs a value\n${USAGE}`));
    if (arg === '--pair') a.pairs.push(value());
    else if (arg === '--memory') a.cptraceArgs.push('--memory', value());
    else if (arg === '--accept-suspect-sync') a.cptraceArgs.push(arg);
    else if (arg === '--cptrace') a.cptrace = value();
    else if (arg === '-f' || arg === '--force') a.force = true;
    else if (arg.startsWith('-')) fail(`unknown option ${arg}\n${USAGE}`);
    else a.positional.push(arg);
  }
  if (a.positional.length !== 2) fail(USAGE);
  // Absolute, so that a directory named like an option never reaches cptrace as one.
  [a.trace, a.out] = a.positional.map((p) => resolve(p));
  if (!a.cptrace) {
    const built = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'cptrace');
    a.cptrace = existsSync(built) ? built : 'cptrace';
  }
  return a;
}

// The table files of any form, and their temporaries: what -f replaces.
const owned = (name) => ['events', 'latency'].some((t) => FORMS.some((f) => name === t + f || name === `${t}${f}.tmp`));

// OUT_DIR, made or emptied of a previous export (-f); never followed through a symlink.
function prepareOut(out, force) {
  let st = null;
  try { st = lstatSync(out); } catch (e) { if (e.code !== 'ENOENT') fail(`${out}: ${e.message}`); }
  if (!st) {
    mkdirSync(out, { recursive: true });
    return out;  // made here: removed again if the export fails
  }
  if (!st.isDirectory()) fail(`${out}: exists and is not a directory (a symlink is not followed)`);
  const names = readdirSync(out);
  if (names.length && !force) fail(`${out}: exists and is not empty (use -f to replace the tables in it)`);
  for (const n of names.filter(owned)) rmSync(join(out, n), { force: true });
  return null;
}

// Opens the pipe's write end for cptrace. That waits for DuckDB to open the
// read end; should the COPY fail before it does, the open is released by
// opening the read end here, and null is returned (the COPY's error is the cause).
async function openWriteEnd(fifo, copy) {
  const opening = open(fifo, C.O_WRONLY);
  const first = await Promise.race([opening, copy.then(() => null, () => null)]);
  if (first) return first;
  const rd = openSync(fifo, C.O_RDONLY | C.O_NONBLOCK);
  (await opening).close();
  closeSync(rd);
  return null;
}

// Runs cptrace with its stdout on `fh`; resolves to { code, signal, stderr, error }.
function runCptrace(state, args, fh) {
  return new Promise((done) => {
    const child = spawn(state.cptrace, args, { stdio: ['ignore', fh.fd, 'pipe'] });
    state.child = child;
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (s) => { if (stderr.length < 65536) stderr += s; });
    child.on('error', (error) => done({ error, stderr }));
    child.on('close', (code, signal) => { state.child = null; done({ code, signal, stderr }); });
  });
}

// One table: cptrace -> pipe -> DuckDB -> OUT/table.parquet (via .tmp, renamed
// when both sides succeeded, so a table file is always whole).
async function exportTable(state, con, a, table) {
  const fifo = join(state.tmp, `${table}.csv`);
  execFileSync('mkfifo', ['-m', '600', fifo]);
  const final = join(a.out, `${table}.parquet`), tmp = `${final}.tmp`;
  state.partial.add(tmp);
  const copy = con.run(`COPY (SELECT * FROM ${tableSource(fifo, table)}) TO ${sqlString(tmp)} ` +
    '(FORMAT parquet, COMPRESSION zstd, PARQUET_VERSION V2)');
  const copied = copy.then(() => null, (e) => e);
  const fh = await openWriteEnd(fifo, copy);
  let run = null;
  if (fh) {
    const args = ['export', 'table', a.trace, '--stdout', table, ...a.pairs.flatMap((p) => ['--pair', p]),
      ...a.cptraceArgs];
    const running = runCptrace(state, args, fh);
    await fh.close();  // cptrace holds the write end now; DuckDB sees the end when it exits
    // DuckDB failing mid-table may keep the read end open: cptrace would block
    // on a full pipe for ever, so it is stopped.
    copied.then((e) => { if (e && state.child) state.child.kill('SIGTERM'); });
    run = await running;
  }
  const copyError = await copied;
  // cptrace's own error first: DuckDB's is then only the cut-short input.
  if (run?.error) fail(`${a.cptrace}: ${run.error.message}`);
  if (run && run.code !== 0) {
    // Killed by SIGPIPE or by us: DuckDB stopped reading, its error says why.
    if (run.signal && copyError) fail(`DuckDB reading cptrace's output into ${final}: ${copyError.message}`);
    const why = run.signal ? `killed by ${run.signal}` : `exit status ${run.code}`;
    fail(`cptrace export table (${why}): ${run.stderr.trim() || copyError?.message || 'no message'}`);
  }
  if (copyError) fail(`DuckDB writing ${final}: ${copyError.message}`);
  renameSync(tmp, final);
  state.partial.delete(tmp);
  return (await con.runAndReadAll(`SELECT count(*) FROM read_parquet(${sqlString(final)})`)).getRows()[0][0];
}

// Everything this run made and did not finish: the temp dir with its pipes and
// DuckDB's spill files, and any table not yet renamed into place. Synchronous,
// so that it also runs from the exit and signal handlers.
function cleanup(state) {
  if (state.child) state.child.kill('SIGTERM');
  for (const f of state.partial) rmSync(f, { force: true });
  if (state.tmp) rmSync(state.tmp, { recursive: true, force: true });
  state.tmp = null;
  // A failed export into a directory it made leaves no empty directory behind.
  if (state.made) try { rmdirSync(state.made); } catch { /* not empty: someone else's files */ }
  state.made = null;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const state = { tmp: null, made: null, child: null, partial: new Set(), cptrace: a.cptrace };
  process.on('exit', () => cleanup(state));
  for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]])
    process.on(sig, () => { cleanup(state); process.exit(code); });
  try {
    if (!existsSync(join(a.trace, 'events.cpt'))) fail(`${a.trace}: not a cptrace trace directory (no events.cpt)`);
    state.made = prepareOut(a.out, a.force);
    // Private (mkdtemp: 0700): the pipes carry the trace's data.
    state.tmp = mkdtempSync(join(tmpdir(), 'cptrace-parquet-'));
    const db = await DuckDBInstance.create(':memory:');
    const con = await db.connect();
    // DuckDB's spill files go with the pipes, not into the working directory.
    await con.run(`SET temp_directory = ${sqlString(join(state.tmp, 'spill'))}`);
    const counts = {};
    // The latency table first, events last, as `export table` does: a directory
    // with events.parquet holds a whole export.
    if (a.pairs.length) counts.latency = await exportTable(state, con, a, 'latency');
    counts.events = await exportTable(state, con, a, 'events');
    process.stderr.write(`export-parquet: ${counts.events} events -> ${join(a.out, 'events.parquet')}` +
      (a.pairs.length ? `, ${counts.latency} tuple rows of ${a.pairs.length} pair(s) -> ` +
        `${join(a.out, 'latency.parquet')}` : '') + '\n');
    state.made = null;
  } finally {
    cleanup(state);
  }
}

main().catch((e) => {
  process.stderr.write(`export-parquet.mjs: ${e instanceof Failure ? e.message : e.stack}\n`);
  process.exit(1);
});
