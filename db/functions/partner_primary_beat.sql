CREATE OR REPLACE FUNCTION partner_primary_beat() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('synchronous_standby_names') = '' OR pg_is_in_recovery() THEN
        RETURN false;
    END IF;
    UPDATE partner_primary_beat SET at = now();
    RETURN true;
END
$$;
