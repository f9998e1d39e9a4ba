CREATE OR REPLACE FUNCTION partner_touch_change_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The erasure of a deleted custom field's values (service/customfield,
    -- Erase) removes from storage what no answer shows any more: it is no
    -- change a sync walk should serve again, so its transaction keeps the
    -- records' change_xid.
    IF current_setting('partner.keep_change_xid', true) = 'on' THEN
        RETURN NEW;
    END IF;
    NEW.change_xid := pg_current_xact_id()::text::bigint; -- partner_change_xid(), inline
    RETURN NEW;
END
$$;
