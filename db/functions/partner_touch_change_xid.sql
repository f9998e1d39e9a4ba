CREATE OR REPLACE FUNCTION partner_touch_change_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_xid := pg_current_xact_id()::text::bigint; -- partner_change_xid(), inline
    RETURN NEW;
END
$$;
