CREATE OR REPLACE FUNCTION partner_change_xid() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT pg_current_xact_id()::text::bigint
$$;
