-- partner_history_timeline is the function of migration 00108, and on a
-- standby partner_standby_timeline() instead of NULL. The primary's branch
-- is unchanged, and the function is still inlined.
CREATE OR REPLACE FUNCTION partner_history_timeline() RETURNS int LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN pg_is_in_recovery() THEN partner_standby_timeline()
                ELSE ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::int END
$$;
