CREATE OR REPLACE FUNCTION partner_sync_horizon() RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint
$$;
