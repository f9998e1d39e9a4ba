-- +goose NO TRANSACTION
-- +goose Up

-- The erasure job (00171) looks every minute for deleted definitions
-- across all workspaces: this partial index holds only those, so the look
-- is a read of the few pending ones, not of every definition.
--
-- Built CONCURRENTLY, outside a transaction, so that definitions go on
-- being written while it builds. A build that failed half-way leaves an
-- invalid index of this name behind, which IF NOT EXISTS would keep: the
-- DROP removes it first, so the file is safe to run again.
DROP INDEX CONCURRENTLY IF EXISTS custom_fields_deleted;
CREATE INDEX CONCURRENTLY IF NOT EXISTS custom_fields_deleted
    ON custom_fields (deleted_at) WHERE deleted_at IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS custom_fields_deleted;
