CREATE OR REPLACE FUNCTION partner_auth_notify_workspace() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('partner_auth', 'w:' || OLD.id::text);
    RETURN NULL;
END
$$;
