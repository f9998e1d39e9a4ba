-- +goose Up
-- The workspace settings page (service/settings) signs members in with a
-- one-time link and keeps them signed in with a session cookie. Both the
-- link's code and the session's token are 256 random bits stored only as
-- their SHA-256 (internal/security/secret), like client secrets.

-- settings_sign_in_codes are the one-time codes of sign-in links: valid
-- until expires_at (at most 5 minutes after creation), usable once
-- (used_at is set by the one UPDATE that redeems a code).
CREATE TABLE settings_sign_in_codes (
    code_hash     bytea PRIMARY KEY CHECK (length(code_hash) = 32),
    workspace_id  uuid NOT NULL,
    member_id     uuid NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz,
    CHECK (expires_at <= created_at + interval '5 minutes'),
    FOREIGN KEY (workspace_id, member_id) REFERENCES members (workspace_id, id) ON DELETE CASCADE
);

CREATE INDEX settings_sign_in_codes_expires ON settings_sign_in_codes (expires_at);

-- settings_sessions are the signed-in browsers: a session ends at
-- expires_at (8 hours after sign-in), after 30 minutes without a request
-- (last_seen_at), or when the member signs out (the row is deleted).
CREATE TABLE settings_sessions (
    token_hash    bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    workspace_id  uuid NOT NULL,
    member_id     uuid NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (workspace_id, member_id) REFERENCES members (workspace_id, id) ON DELETE CASCADE
);

CREATE INDEX settings_sessions_member ON settings_sessions (workspace_id, member_id);
CREATE INDEX settings_sessions_expires ON settings_sessions (expires_at);

-- +goose Down
DROP TABLE settings_sessions;
DROP TABLE settings_sign_in_codes;
