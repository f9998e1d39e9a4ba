-- webhook_claim_sealed leases due deliveries to this replica's workers and
-- answers what each needs to send its attempt: the endpoint's secrets
-- sealed (and their plaintext copies while webhook_secrets keeps them;
-- '' once not). p_plain_only leaves out the endpoints whose plaintext
-- copies are gone: release 1.1.0 (webhook_claim_due) signs with them. The scope that reads an
-- event type is p_scopes[i] for the type p_types[i]: the caller passes its
-- table of event types (the Go package eventtype, the one list of them),
-- so the database holds no copy of the mapping; a type the table does not
-- list is read by no scope.
--
-- Fair shares (docs/webhooks.md, "Fair shares and the backlog bound"): a
-- workspace gets at most its share of this replica's workers, p_pool
-- divided among the workspaces with deliveries to claim or with
-- deliveries in flight here (p_busy_ws, each with p_busy_n in flight), and
-- never less than p_min_share; within that, less what it has in flight.
-- The workers beyond p_pool are so never any one workspace's, and a
-- workspace with due deliveries finds some free at once, however many
-- another workspace's hanging receivers hold. Candidates are taken
-- round-robin: every workspace's first, then every workspace's second,
-- and so on (and within a workspace, its endpoints' firsts first).
CREATE OR REPLACE FUNCTION webhook_claim_sealed(p_lease_ms int, p_per_endpoint int, p_max int, p_types text[], p_scopes text[],
                                                p_pool int, p_min_share int, p_busy_ws uuid[], p_busy_n int[],
                                                p_plain_only boolean)
RETURNS SETOF webhook_claimed_sealed LANGUAGE plpgsql AS $$
BEGIN
    -- An attempt, a claim or a fan-out lost to a crash is made again
    -- (at least once), so none waits for its commit to be flushed.
    PERFORM set_config('synchronous_commit', 'off', true);
    -- One statement for every endpoint: each enabled endpoint with a due
    -- delivery gets at most its free slots (its leased deliveries counted
    -- across replicas; one slot in all for an endpoint whose last two or
    -- more attempts timed out, until it answers again: webhook_endpoints.timeouts),
    -- from its due deliveries in due order, the first pending one of each
    -- record only; deliveries of an event type the client may no longer
    -- read, or of a type p_types does not list, are dropped; each
    -- workspace's share bounds its part, p_max the whole.
    RETURN QUERY
    WITH ep AS (
        SELECT w.workspace_id, w.id, cl.scopes,
               CASE WHEN w.timeouts >= 2 THEN 1 ELSE p_per_endpoint END
                 - (SELECT count(*)::int FROM webhook_deliveries f
                    WHERE f.workspace_id = w.workspace_id AND f.endpoint_id = w.id
                      AND f.lease_until IS NOT NULL AND f.lease_until > now() AND f.status = 'pending') AS slots
        FROM webhook_endpoints w
        JOIN api_clients cl ON cl.workspace_id = w.workspace_id AND cl.id = w.client_id AND cl.status = 'active'
        WHERE w.status = 'enabled'
          AND (NOT p_plain_only OR w.secret <> '' AND (w.previous_expires_at IS NULL OR w.previous_expires_at <= now()
                                                       OR coalesce(w.previous_secret, '') <> ''))
          AND (SELECT d.next_attempt_at FROM webhook_deliveries d
               WHERE d.workspace_id = w.workspace_id AND d.endpoint_id = w.id AND d.status = 'pending'
               ORDER BY d.next_attempt_at LIMIT 1) <= now()
    ), cand AS (
        SELECT c.workspace_id, c.endpoint_id, c.event_xid, c.event_seq, c.next_attempt_at, ep.slots,
               coalesce(p_scopes[array_position(p_types, c.event_type)] = ANY (ep.scopes), false) AS readable
        FROM ep, LATERAL (
            SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq, d.next_attempt_at, d.event_type
            FROM webhook_deliveries d
            WHERE d.workspace_id = ep.workspace_id AND d.endpoint_id = ep.id AND d.status = 'pending'
              AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now())
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                              WHERE p.workspace_id = d.workspace_id AND p.endpoint_id = d.endpoint_id
                                AND p.record_id = d.record_id AND p.status = 'pending'
                                AND (p.event_xid, p.event_seq) < (d.event_xid, d.event_seq)
                              OFFSET 0)
            ORDER BY d.next_attempt_at, d.event_xid, d.event_seq
            LIMIT ep.slots * 2
            FOR UPDATE OF d SKIP LOCKED
        ) c
        WHERE ep.slots > 0
    ), share AS (
        SELECT greatest(p_min_share, p_pool / greatest(count(*)::int, 1)) AS n
        FROM (SELECT c.workspace_id FROM cand c UNION SELECT b.ws FROM unnest(p_busy_ws) AS b(ws)) AS a
    ), pick AS (
        SELECT z.workspace_id, z.endpoint_id, z.event_xid, z.event_seq FROM (
            SELECT y.*, row_number() OVER (PARTITION BY y.workspace_id ORDER BY y.n, y.r) AS wn FROM (
                SELECT c.*, random() AS r,
                       row_number() OVER (PARTITION BY c.workspace_id, c.endpoint_id
                                          ORDER BY c.next_attempt_at, c.event_xid, c.event_seq) AS n
                FROM cand c WHERE c.readable) y
            WHERE y.n <= y.slots) z
        WHERE z.wn <= (SELECT share.n FROM share) - coalesce(p_busy_n[array_position(p_busy_ws, z.workspace_id)], 0)
        ORDER BY z.wn, z.r
        LIMIT p_max
    ), dropped AS (
        DELETE FROM webhook_deliveries x USING cand c
        WHERE NOT c.readable AND x.workspace_id = c.workspace_id AND x.endpoint_id = c.endpoint_id
          AND x.event_xid = c.event_xid AND x.event_seq = c.event_seq
    ), leased AS (
        UPDATE webhook_deliveries x
        SET lease_until = clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0),
            attempts = x.attempts + 1, first_attempt_at = coalesce(x.first_attempt_at, now())
        FROM pick c
        WHERE x.workspace_id = c.workspace_id AND x.endpoint_id = c.endpoint_id
          AND x.event_xid = c.event_xid AND x.event_seq = c.event_seq
        RETURNING x.*
    )
    SELECT l.workspace_id, l.endpoint_id, l.event_xid, l.event_seq, l.event_id, l.event_type, l.record_id,
           l.attempts, l.lease_until, w.url, w.secret,
           CASE WHEN w.previous_expires_at > now() THEN w.previous_secret END, w.previous_expires_at,
           e.object, e.changed, coalesce(e.created_at, l.created_at),
           w.secret_sealed, CASE WHEN w.previous_expires_at > now() THEN w.previous_secret_sealed END
    FROM leased l
    JOIN webhook_endpoints w ON w.workspace_id = l.workspace_id AND w.id = l.endpoint_id
    LEFT JOIN events e ON e.workspace_id = l.workspace_id AND e.change_xid = l.event_xid AND e.seq = l.event_seq;
END
$$;
