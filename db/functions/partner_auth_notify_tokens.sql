CREATE OR REPLACE FUNCTION partner_auth_notify_tokens() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('partner_auth', 'c:' || client_id::text)
    FROM (SELECT DISTINCT client_id FROM changed_tokens) AS c;
    RETURN NULL;
END
$$;
