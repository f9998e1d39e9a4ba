-- +goose Up

-- Custom fields (issue 35; product.md "Custom fields"): a workspace's own
-- typed fields on contacts and leads.
--
-- custom_fields holds the definitions. key and type never change. A
-- deleted definition keeps its row, with deleted_at, until the background
-- erasure has removed its values from every record (within 24 h, in
-- bounded steps): its values leave every answer at once, and its key stays
-- taken (409 key_in_use) until the row goes. options is the select types'
-- [{"value", "label"}] list, in the order values are answered.
CREATE TABLE custom_fields (
    workspace_id uuid NOT NULL REFERENCES workspaces (id),
    id           uuid NOT NULL,
    object       text NOT NULL CHECK (object IN ('contact', 'lead')),
    key          text NOT NULL CHECK (key ~ '^[a-z][a-z0-9_]{0,39}$'),
    label        text NOT NULL,
    type         text NOT NULL CHECK (type IN ('text', 'number', 'boolean', 'date', 'datetime', 'select', 'multiselect', 'url', 'email')),
    options      jsonb,
    required     boolean NOT NULL DEFAULT false,
    description  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    deleted_at   timestamptz,
    PRIMARY KEY (workspace_id, id),
    CONSTRAINT custom_fields_key UNIQUE (workspace_id, object, key),
    CHECK ((type IN ('select', 'multiselect')) = (options IS NOT NULL))
);

-- The records' values: a JSON object from key to value, NULL when the
-- record holds none. Values are stored as answered (numbers as JSON
-- numbers, dates as "YYYY-MM-DD", datetimes as RFC 3339 UTC, multiselect
-- as an array in the options' order), so that an equality filter is a
-- containment (@>) an index can serve. The previous release neither reads
-- nor writes them.
ALTER TABLE contacts ADD COLUMN custom_fields jsonb;
ALTER TABLE leads ADD COLUMN custom_fields jsonb;

-- +goose Down
ALTER TABLE leads DROP COLUMN custom_fields;
ALTER TABLE contacts DROP COLUMN custom_fields;
DROP TABLE custom_fields;
