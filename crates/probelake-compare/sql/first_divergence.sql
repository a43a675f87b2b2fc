-- Where do two runs first part? For every (step, stage, rank) present in both runs, the first
-- entry in execution order with an output whose max, min, mean or norm differs by more than
-- `threshold` (msprobe's -da rule: relative error > 0.5; 0 names the first difference at all).
-- Runs: --run target=DATASET --run golden=DATASET. Edit the threshold in `params` below.
-- Backward entries are matched as msprobe does: by their order among backward calls of the
-- same op, not by their call counter. `after_communication` says whether a communication op
-- (all_reduce, send, broadcast, ...) ran before the divergence on that rank: msprobe -da
-- names, per step folder, only the ranks where it is false when there are any (docs/compare.md).
-- In probelake, `SELECT * FROM first_divergence(0.5)` gives the same rows, reading each unit
-- only up to its first divergence (docs/sql.md); this text is the portable definition.
WITH params AS (SELECT 0.5 AS threshold),
outputs AS (
    SELECT 'target' AS side, step, stage, rank, inner_step, pid, seq, name, op, direction, item,
           max, min, mean, norm
    FROM target.dump
    WHERE section = 'output'
      AND name NOT LIKE 'Torch.empty%' AND name NOT LIKE 'Torch.fill%' AND name NOT LIKE 'Tensor.__setitem__%'
    UNION ALL
    SELECT 'golden', step, stage, rank, inner_step, pid, seq, name, op, direction, item, max, min, mean, norm
    FROM golden.dump
    WHERE section = 'output'
),
-- The order of a backward entry among the backward calls of its op. Other rows only need a
-- value, so they share one window partition per unit and tie on the order key: that keeps
-- the sort cheap (it is the largest cost after reading the files).
numbered AS (
    SELECT *,
           dense_rank() OVER (PARTITION BY side, step, stage, rank, inner_step, pid,
                                           CASE WHEN direction = 'backward' THEN op END
                              ORDER BY CASE WHEN direction = 'backward' THEN seq END) - 1 AS backward_order
    FROM outputs
),
keyed AS (
    SELECT side, step, stage, rank, inner_step, seq, name, item, max, min, mean, norm,
           CASE
               WHEN direction <> 'backward' THEN item
               WHEN name LIKE '%.backward' THEN op || '.' || CAST(backward_order AS VARCHAR) || '.backward'
                                                || substr(item, length(name) + 1)
               ELSE op || '.backward.' || CAST(backward_order AS VARCHAR) || substr(item, length(name) + 1)
           END AS key
    FROM numbered
),
compared AS (
    SELECT t.step, t.stage, t.rank, t.seq, t.name, t.item,
           greatest(coalesce(rel_err(t.max, g.max), 0), coalesce(rel_err(t.min, g.min), 0),
                    coalesce(rel_err(t.mean, g.mean), 0), coalesce(rel_err(t.norm, g.norm), 0)) AS rel_err,
           t.max AS target_max, g.max AS golden_max, t.norm AS target_norm, g.norm AS golden_norm
    FROM keyed t
    JOIN keyed g ON t.step = g.step AND t.stage = g.stage AND t.rank = g.rank AND t.key = g.key
                AND t.inner_step IS NOT DISTINCT FROM g.inner_step
    WHERE t.side = 'target' AND g.side = 'golden'
),
-- Any statistic above the threshold is the largest one above it. `rel_err > 0` first keeps
-- the join with the one-row `params` to the few rows that differ at all.
diverging AS (
    SELECT c.*, row_number() OVER (PARTITION BY c.step, c.stage, c.rank ORDER BY c.seq, c.item) AS n
    FROM compared c CROSS JOIN params p
    WHERE c.rel_err > 0 AND c.rel_err > p.threshold
),
-- `api` (the name's first part, a partition column) repeats the first name test so that the
-- scan opens only those files: on most ranks there are none.
communication AS (
    SELECT step, stage, rank, min(seq) AS first_seq
    FROM target.dump
    WHERE api IN ('Distributed', 'MintDistributed', 'communication')
      AND (name LIKE 'Distributed.%' OR name LIKE 'MintDistributed.%' OR name LIKE 'communication.comm_func.%')
      AND (name LIKE '%send%' OR name LIKE '%recv%' OR name LIKE '%broadcast%' OR name LIKE '%reduce%'
           OR name LIKE '%gather%' OR name LIKE '%scatter%' OR name LIKE '%all_to_all%')
    GROUP BY step, stage, rank
)
SELECT d.step, d.stage, d.rank, d.name AS first_divergence, d.item, d.rel_err, d.target_max, d.golden_max,
       d.target_norm, d.golden_norm, coalesce(c.first_seq < d.seq, false) AS after_communication
FROM diverging d
LEFT JOIN communication c ON c.step = d.step AND c.stage = d.stage AND c.rank = d.rank
WHERE d.n = 1
ORDER BY d.step, d.stage, d.rank;
