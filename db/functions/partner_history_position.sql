-- partner_history_position is the function of migration 00108, and on a
-- standby the end of the WAL it has received (else replayed), in bytes:
-- every commit its snapshots show was replayed, so lies before it. (The
-- replay position alone is noted just after a record's effects are
-- visible; the received position never lags them.) Past what was
-- replayed, it only makes a cursor refused after a failover that forked
-- off in between.
CREATE OR REPLACE FUNCTION partner_history_position() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN pg_is_in_recovery()
                THEN (greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) - '0/0'::pg_lsn)::bigint
                ELSE (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint END
$$;
