-- partner_history_note records where the primary's current timeline began
-- (NULL when that is not known: then it never will be, and a later guess
-- is not trusted), the first time it is called there. The service calls
-- it on each new connection. It never fails: on a standby, in a read-only
-- transaction, or on any error it records nothing and answers false.
CREATE OR REPLACE FUNCTION partner_history_note() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    tl int;
BEGIN
    IF pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' THEN
        RETURN false;
    END IF;
    tl := partner_history_timeline();
    IF EXISTS (SELECT FROM history_forks WHERE timeline = tl) THEN
        RETURN false;
    END IF;
    -- Not worth waiting for a synchronous standby (a connection would wait
    -- with it): a row lost in a failover only makes cursors of this
    -- timeline refused, as without it.
    PERFORM set_config('synchronous_commit', 'local', true);
    INSERT INTO history_forks (timeline, began_at) VALUES (tl, partner_history_began())
        ON CONFLICT (timeline) DO NOTHING;
    RETURN FOUND;
EXCEPTION WHEN OTHERS THEN
    RETURN false;
END
$$;
