-- Per flow and direction of a `cptrace netlat --table` directory: the matched
-- packets with a strict bound, their one-way delay's p50 and p99 (ns) with a
-- strict bound on each percentile of the true delays, and what the two nodes
-- sent and received. Equal to `cptrace netlat ... --json` ("flows"), number for
-- number (nearest rank, as hop_p99.sql explains); packets whose stamp falls in a
-- hull transition (guaranteed false) are left out, as netlat leaves them out.
WITH d AS (
  SELECT proto, saddr, sport, daddr, dport, from_node, to_node,
         count(*)                          AS bounded,
         quantile_disc(ns, 0.5::DOUBLE)    AS p50,
         quantile_disc(ns_lo, 0.5::DOUBLE) AS p50_lo,
         quantile_disc(ns_hi, 0.5::DOUBLE) AS p50_hi,
         quantile_disc(ns, 0.99::DOUBLE)    AS p99,
         quantile_disc(ns_lo, 0.99::DOUBLE) AS p99_lo,
         quantile_disc(ns_hi, 0.99::DOUBLE) AS p99_hi
  FROM packets WHERE guaranteed
  GROUP BY ALL
)
SELECT d.*, s.sent, s.retransmitted, r.received, r.out_of_order
FROM d
JOIN flows s ON (s.proto, s.saddr, s.sport, s.daddr, s.dport, s.node) =
                (d.proto, d.saddr, d.sport, d.daddr, d.dport, d.from_node)
JOIN flows r ON (r.proto, r.saddr, r.sport, r.daddr, r.dport, r.node) =
                (d.proto, d.saddr, d.sport, d.daddr, d.dport, d.to_node)
ORDER BY proto, saddr, sport, daddr, dport, from_node, to_node;
