-- SchemaFunctionsLock serialises the replicas that apply db/functions at
-- once (db.applyFunctions), until their transaction ends. The key is the
-- text 'partner.schema_functions' hashed by PostgreSQL.
-- name: SchemaFunctionsLock :exec
SELECT pg_advisory_xact_lock(hashtext('partner.schema_functions'));

-- SchemaFunctionsList is the SHA-256 of each function file as last
-- applied, and the release that applied it.
-- name: SchemaFunctionsList :many
SELECT name, sha256, release FROM schema_functions ORDER BY name;

-- SchemaFunctionSave records that a function file was applied.
-- name: SchemaFunctionSave :exec
INSERT INTO schema_functions (name, sha256, release) VALUES (@name, @sha256, @release)
ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, release = excluded.release, applied_at = now();

-- SchemaFunctionsUnchecked lets the transaction create functions whose
-- bodies name objects that a later file creates (check_function_bodies
-- off until it ends); make lint checks the bodies once all are applied.
-- name: SchemaFunctionsUnchecked :exec
SELECT set_config('check_function_bodies', 'off', true);

-- SchemaFunctionsPresent names those of names that are a function or a
-- view of the schema: a function file whose object is missing (dropped by
-- hand) is applied again even though its SHA-256 is the one recorded.
-- name: SchemaFunctionsPresent :many
SELECT p.proname::text AS name FROM pg_catalog.pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY (@names::text[])
UNION
SELECT c.relname::text FROM pg_catalog.pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('v', 'm') AND c.relname = ANY (@names::text[]);

-- MigrationWaitLimits is the server's deadlock_timeout and this session's
-- lock_timeout (the role's), in milliseconds (0: no limit). A migration
-- waits for its locks less long than a request waits before it checks for
-- a deadlock (db.migrationLockTimeout), so the migration, never a request,
-- is the one a deadlock between them aborts.
-- name: MigrationWaitLimits :one
SELECT (SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = 'deadlock_timeout') AS deadlock_ms,
       (SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = 'lock_timeout') AS lock_ms;
