// The tables of `cptrace export table` (and of `netlat --table`) as DuckDB sees them, shared by
// query.mjs (which queries an export) and export-parquet.mjs (which writes one):
// the column types of docs/analysis-export.md, given explicitly so that nothing
// depends on DuckDB's type sniffing (a 64-bit tuple id is not a double), and
// which file of a directory holds a table.
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export const COLUMNS = {
  events: {
    node: 'VARCHAR', reference: 'BOOLEAN', kind: 'VARCHAR', channel: 'VARCHAR', channel_id: 'VARCHAR',
    tuple: 'UBIGINT', pid: 'UINTEGER', tid: 'UINTEGER', cpu: 'USMALLINT', local_ts: 'UBIGINT',
    ref_ts: 'BIGINT', ref_lo: 'BIGINT', ref_hi: 'BIGINT', time_ns: 'BIGINT', time_lo_ns: 'BIGINT', time_hi_ns: 'BIGINT',
  },
  latency: {
    from_channel: 'VARCHAR', to_channel: 'VARCHAR', tuple: 'UBIGINT', from_node: 'VARCHAR', to_node: 'VARCHAR',
    scenario: 'VARCHAR', remote: 'BOOLEAN', from_ref_ts: 'BIGINT', ticks: 'BIGINT', ticks_lo: 'BIGINT',
    ticks_hi: 'BIGINT', ns: 'BIGINT', ns_lo: 'BIGINT', ns_hi: 'BIGINT',
  },
  // `cptrace netlat --table`: one row per matched packet, one per flow and node.
  packets: {
    from_node: 'VARCHAR', to_node: 'VARCHAR', proto: 'VARCHAR', saddr: 'VARCHAR', sport: 'USMALLINT',
    daddr: 'VARCHAR', dport: 'USMALLINT', seq: 'UINTEGER', len: 'UINTEGER', tx_ts: 'UBIGINT', rx_ts: 'UBIGINT',
    tx_mono_ns: 'UBIGINT', rx_mono_ns: 'UBIGINT', ticks: 'BIGINT', ticks_lo: 'BIGINT', ticks_hi: 'BIGINT',
    ns: 'BIGINT', ns_lo: 'BIGINT', ns_hi: 'BIGINT', guaranteed: 'BOOLEAN',
  },
  flows: {
    proto: 'VARCHAR', saddr: 'VARCHAR', sport: 'USMALLINT', daddr: 'VARCHAR', dport: 'USMALLINT', node: 'VARCHAR',
    sent: 'UBIGINT', retransmitted: 'UBIGINT', received: 'UBIGINT', out_of_order: 'UBIGINT',
  },
};

// The forms a table can take in a directory, the preferred first: Parquet
// (`export table --parquet` or export-parquet.mjs; smallest, typed, read by
// column), then the zstd CSV of
// `export table`, then its --plain CSV.
export const FORMS = ['.parquet', '.csv.zst', '.csv'];

export const sqlString = (s) => `'${s.replaceAll("'", "''")}'`;

// The file holding table `name` in `dir`, or null.
export function tableFile(dir, name) {
  for (const form of FORMS) if (existsSync(join(dir, name + form))) return join(dir, name + form);
  return null;
}

// A DuckDB table expression reading `file` (any of FORMS) as table `name`.
// Parquet carries its own types; CSV gets them here, with sniffing off, so that
// a pipe can be read as a stream (nothing is read twice). read_csv decompresses
// a .zst by its extension.
export function tableSource(file, name) {
  if (file.endsWith('.parquet')) return `read_parquet(${sqlString(file)})`;
  const cols = Object.entries(COLUMNS[name]).map(([c, t]) => `${sqlString(c)}: ${sqlString(t)}`).join(', ');
  return `read_csv(${sqlString(file)}, header = true, columns = {${cols}}, auto_detect = false, delim = ',', ` +
    `nullstr = '', quote = '"', escape = '"')`;
}
