-- +goose Up

-- Replicas cache token checks in memory. These triggers tell every
-- replica, through LISTEN partner_auth, when a cached answer may have gone
-- stale: "c:<client id>" when a client's status, secret or name changes or
-- any of its tokens is revoked, "w:<workspace id>" when a workspace is
-- renamed. NOTIFY is transactional: replicas hear of a change exactly when
-- it commits.

-- +goose StatementBegin
CREATE FUNCTION partner_auth_notify_tokens() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('partner_auth', 'c:' || client_id::text)
    FROM (SELECT DISTINCT client_id FROM changed_tokens) AS c;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER access_tokens_notify_update
    AFTER UPDATE ON access_tokens
    REFERENCING NEW TABLE AS changed_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION partner_auth_notify_tokens();

CREATE TRIGGER access_tokens_notify_delete
    AFTER DELETE ON access_tokens
    REFERENCING OLD TABLE AS changed_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION partner_auth_notify_tokens();

-- +goose StatementBegin
CREATE FUNCTION partner_auth_notify_client() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('partner_auth', 'c:' || OLD.id::text);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Only changes a token check depends on: not the batched last_used_at.
CREATE TRIGGER api_clients_notify_update
    AFTER UPDATE ON api_clients
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.secret_hash IS DISTINCT FROM NEW.secret_hash
          OR OLD.name IS DISTINCT FROM NEW.name OR OLD.scopes IS DISTINCT FROM NEW.scopes)
    EXECUTE FUNCTION partner_auth_notify_client();

CREATE TRIGGER api_clients_notify_delete
    AFTER DELETE ON api_clients
    FOR EACH ROW EXECUTE FUNCTION partner_auth_notify_client();

-- +goose StatementBegin
CREATE FUNCTION partner_auth_notify_workspace() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('partner_auth', 'w:' || OLD.id::text);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER workspaces_notify
    AFTER UPDATE OF name OR DELETE ON workspaces
    FOR EACH ROW EXECUTE FUNCTION partner_auth_notify_workspace();

-- +goose Down
DROP TRIGGER workspaces_notify ON workspaces;
DROP FUNCTION partner_auth_notify_workspace();
DROP TRIGGER api_clients_notify_delete ON api_clients;
DROP TRIGGER api_clients_notify_update ON api_clients;
DROP FUNCTION partner_auth_notify_client();
DROP TRIGGER access_tokens_notify_delete ON access_tokens;
DROP TRIGGER access_tokens_notify_update ON access_tokens;
DROP FUNCTION partner_auth_notify_tokens();
