-- +goose Up
-- A write of the service waits at most a second for a row lock: our own
-- writes take contact locks in one order (by email, then external id) and
-- never deadlock each other, so a longer wait means another transaction
-- holds the row, and the request is better answered 503 (lock_not_available,
-- a retry may pass) than kept holding a pooled connection that other
-- tenants need. The setting is the role's default for new sessions, so it
-- holds behind PgBouncer too; functions that bound their waits tighter
-- (lead_create_group) set their own per transaction. When migrations run as
-- another role than the service, set it on the service's role by hand
-- (docs/operations.md).
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER ROLE %I SET lock_timeout = %L', current_user, '1s');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER ROLE %I RESET lock_timeout', current_user);
END
$$;
-- +goose StatementEnd
