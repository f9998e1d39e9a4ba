CREATE OR REPLACE FUNCTION partner_auth_notify_client() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('partner_auth', 'c:' || OLD.id::text);
    RETURN NULL;
END
$$;
