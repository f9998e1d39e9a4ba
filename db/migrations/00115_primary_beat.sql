-- +goose Up

-- partner_primary_beat proves that the server can still commit as the
-- service needs: on a primary with synchronous replication, the caller's
-- commit of its one-row update waits for a synchronous standby, so it
-- returns only while a standby confirms this server's writes. A primary
-- cut off from its standbys (a partition) keeps answering reads, but a
-- new primary may already acknowledge writes that it will never see: the
-- service reads from a server only while a beat of the last second
-- committed there (db/beat.go). Without synchronous replication (one
-- server: nothing to be cut off from) it writes nothing and answers false,
-- and the service beats no more on that server.
CREATE TABLE partner_primary_beat (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    at  timestamptz NOT NULL
);
INSERT INTO partner_primary_beat VALUES (true, now());

-- +goose StatementBegin
CREATE FUNCTION partner_primary_beat() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('synchronous_standby_names') = '' OR pg_is_in_recovery() THEN
        RETURN false;
    END IF;
    UPDATE partner_primary_beat SET at = now();
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION partner_primary_beat();
DROP TABLE partner_primary_beat;
