-- +goose Up

-- Every table that holds workspace data leads its primary key with
-- workspace_id, and every query filters by it. The two exceptions are
-- lookups by a high-entropy credential: api_clients by client id (the token
-- endpoint does not know the workspace yet) and access_tokens by token hash.

CREATE TABLE workspaces (
    id          uuid PRIMARY KEY,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE members (
    workspace_id     uuid NOT NULL REFERENCES workspaces (id),
    id               uuid NOT NULL,
    email            text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    approved         boolean NOT NULL,
    settings_access  boolean NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, id),
    UNIQUE (workspace_id, email)
);

CREATE TABLE api_clients (
    workspace_id       uuid NOT NULL REFERENCES workspaces (id),
    id                 uuid NOT NULL UNIQUE,
    name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    secret_hash        bytea NOT NULL CHECK (length(secret_hash) = 32),
    scopes             text[] NOT NULL,
    status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive', 'revoked')),
    redirect_uris      text[] NOT NULL DEFAULT '{}',
    created_by         uuid NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    secret_rotated_at  timestamptz,
    revoked_at         timestamptz,
    last_used_at       timestamptz,
    PRIMARY KEY (workspace_id, id),
    FOREIGN KEY (workspace_id, created_by) REFERENCES members (workspace_id, id)
);

CREATE TABLE access_tokens (
    token_hash    bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    workspace_id  uuid NOT NULL,
    client_id     uuid NOT NULL,
    scopes        text[] NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    revoked_at    timestamptz,
    FOREIGN KEY (workspace_id, client_id) REFERENCES api_clients (workspace_id, id)
);

CREATE INDEX access_tokens_client ON access_tokens (workspace_id, client_id) WHERE revoked_at IS NULL;

CREATE TABLE audit_events (
    workspace_id     uuid NOT NULL REFERENCES workspaces (id),
    id               bigint GENERATED ALWAYS AS IDENTITY,
    actor_member_id  uuid NOT NULL,
    action           text NOT NULL,
    client_id        uuid,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, id)
);

CREATE TABLE contacts (
    workspace_id  uuid NOT NULL REFERENCES workspaces (id),
    id            uuid NOT NULL,
    email         text,
    phone         text,
    first_name    text,
    last_name     text,
    company_name  text,
    job_title     text,
    external_id   text,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, id),
    CHECK (email IS NOT NULL OR phone IS NOT NULL)
);

CREATE UNIQUE INDEX contacts_email ON contacts (workspace_id, email) WHERE email IS NOT NULL;
CREATE UNIQUE INDEX contacts_external_id ON contacts (workspace_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX contacts_created ON contacts (workspace_id, created_at, id);
CREATE INDEX contacts_updated ON contacts (workspace_id, updated_at, id);

CREATE TABLE leads (
    workspace_id    uuid NOT NULL REFERENCES workspaces (id),
    id              uuid NOT NULL,
    contact_id      uuid NOT NULL,
    title           text NOT NULL,
    status          text NOT NULL CHECK (status IN ('new', 'contacted', 'qualified', 'unqualified', 'converted')),
    source          text,
    campaign        text,
    message         text,
    value_amount    bigint CHECK (value_amount >= 0),
    value_currency  text,
    external_id     text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, id),
    FOREIGN KEY (workspace_id, contact_id) REFERENCES contacts (workspace_id, id),
    CHECK ((value_amount IS NULL) = (value_currency IS NULL))
);

CREATE UNIQUE INDEX leads_external_id ON leads (workspace_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX leads_created ON leads (workspace_id, created_at, id);
CREATE INDEX leads_updated ON leads (workspace_id, updated_at, id);
CREATE INDEX leads_contact ON leads (workspace_id, contact_id, created_at, id);
CREATE INDEX leads_status ON leads (workspace_id, status, created_at, id);
CREATE INDEX leads_source ON leads (workspace_id, source, created_at, id);

-- idempotency_keys remembers the response of a successful create for at
-- least 24 hours, per client and path.
CREATE TABLE idempotency_keys (
    workspace_id     uuid NOT NULL,
    client_id        uuid NOT NULL,
    path             text NOT NULL,
    key              text NOT NULL,
    request_hash     bytea NOT NULL,
    response         bytea NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, client_id, path, key)
);

CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- server_keys holds secrets every replica must share, such as the cursor
-- signing key. They are created on first start.
CREATE TABLE server_keys (
    name        text PRIMARY KEY,
    key         bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE server_keys;
DROP TABLE idempotency_keys;
DROP TABLE leads;
DROP TABLE contacts;
DROP TABLE audit_events;
DROP TABLE access_tokens;
DROP TABLE api_clients;
DROP TABLE members;
DROP TABLE workspaces;
