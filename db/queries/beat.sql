-- PrimaryBeat commits a beat on a server with synchronous replication (its
-- commit then waits for a standby) and answers whether it wrote one; see
-- db/beat.go.
-- name: PrimaryBeat :one
SELECT partner_primary_beat()::boolean AS wrote;
