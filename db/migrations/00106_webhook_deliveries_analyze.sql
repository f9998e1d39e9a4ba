-- +goose Up
-- webhook_deliveries fills in bursts (a fan-out of a backlog adds
-- thousands of rows at once): analysed at the default 10 % of changed
-- rows, the claim's plans were made on statistics of a near-empty table
-- (make bench: 572 ms a claim, 4.5 ms after an ANALYZE). Analyse and
-- vacuum it after 1 % (at least 1,000 rows) instead.
ALTER TABLE webhook_deliveries SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000,
                                    autovacuum_vacuum_scale_factor = 0.01);

-- +goose Down
ALTER TABLE webhook_deliveries RESET (autovacuum_analyze_scale_factor, autovacuum_analyze_threshold,
                                      autovacuum_vacuum_scale_factor);
