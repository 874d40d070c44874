-- Per hop (channel pair and node pair) of a `cptrace export table` directory:
-- the tuple count, p50 and p99 of the durations (ns), a strict bound on each
-- percentile of the true durations, and the p99 of the bound width. Equal to
-- `cptrace latency OUT --from F --to T --json` ("hops"), number for number:
--  * cptrace's percentile is nearest-rank, the k-th smallest value with
--    k = max(1, ceil(p * n)); quantile_disc with a DOUBLE fraction picks the same
--    element (quantile_cont would interpolate between two);
--  * every true duration lies in [ns_lo, ns_hi], so the k-th smallest true
--    duration lies between the k-th smallest ns_lo and the k-th smallest ns_hi.
SELECT from_channel, to_channel, from_node, to_node,
       count(*)                                   AS count,
       quantile_disc(ns, 0.5::DOUBLE)             AS p50,
       quantile_disc(ns_lo, 0.5::DOUBLE)          AS p50_lo,
       quantile_disc(ns_hi, 0.5::DOUBLE)          AS p50_hi,
       quantile_disc(ns, 0.99::DOUBLE)            AS p99,
       quantile_disc(ns_lo, 0.99::DOUBLE)         AS p99_lo,
       quantile_disc(ns_hi, 0.99::DOUBLE)         AS p99_hi,
       quantile_disc(ns_hi - ns_lo, 0.99::DOUBLE) AS width_p99
FROM latency
GROUP BY ALL
ORDER BY from_channel, to_channel, from_node, to_node;
