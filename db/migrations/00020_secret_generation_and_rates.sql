-- +goose Up

-- Rotation race. A token request authenticates the client, then inserts its
-- token in a batch outside any transaction of the rotation, so a token
-- checked against the old secret could be inserted after the rotation's
-- revoke-all UPDATE had run, and stay valid. Every client now carries the
-- generation of its secret, bumped by each rotation, and every token the
-- generation its secret was verified against. The token check compares the
-- two in its join: a token minted with an old secret is invalid the moment
-- the rotation commits, whatever the timing of its INSERT.
ALTER TABLE api_clients ADD COLUMN secret_generation bigint NOT NULL DEFAULT 1;
ALTER TABLE access_tokens ADD COLUMN secret_generation bigint NOT NULL DEFAULT 1;

-- A client's own rate limits, in requests per second; NULL means the
-- server default (PARTNER_RATE_READ / PARTNER_RATE_WRITE).
ALTER TABLE api_clients
    ADD COLUMN read_rate integer CHECK (read_rate > 0),
    ADD COLUMN write_rate integer CHECK (write_rate > 0);

-- Token checks carry the client's rates and secret generation, and are
-- cached: replicas must hear when they change (see 00002).
DROP TRIGGER api_clients_notify_update ON api_clients;
CREATE TRIGGER api_clients_notify_update
    AFTER UPDATE ON api_clients
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.secret_hash IS DISTINCT FROM NEW.secret_hash
          OR OLD.secret_generation IS DISTINCT FROM NEW.secret_generation
          OR OLD.name IS DISTINCT FROM NEW.name OR OLD.scopes IS DISTINCT FROM NEW.scopes
          OR OLD.read_rate IS DISTINCT FROM NEW.read_rate OR OLD.write_rate IS DISTINCT FROM NEW.write_rate)
    EXECUTE FUNCTION partner_auth_notify_client();

-- +goose Down
DROP TRIGGER api_clients_notify_update ON api_clients;
CREATE TRIGGER api_clients_notify_update
    AFTER UPDATE ON api_clients
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.secret_hash IS DISTINCT FROM NEW.secret_hash
          OR OLD.name IS DISTINCT FROM NEW.name OR OLD.scopes IS DISTINCT FROM NEW.scopes)
    EXECUTE FUNCTION partner_auth_notify_client();
ALTER TABLE api_clients DROP COLUMN write_rate, DROP COLUMN read_rate;
ALTER TABLE access_tokens DROP COLUMN secret_generation;
ALTER TABLE api_clients DROP COLUMN secret_generation;
