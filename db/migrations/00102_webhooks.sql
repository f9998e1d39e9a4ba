-- +goose Up

-- Webhook endpoints and their deliveries (docs/architecture.md,
-- "Webhooks"). An endpoint belongs to the API client that created it.
--
-- secret signs deliveries (Standard Webhooks, whsec_…). It is kept as it
-- was issued, not hashed: an HMAC needs the key itself, as at every
-- provider of signed webhooks. It is shown once, never listed, never
-- logged. previous_secret signs too until previous_expires_at (a rotation's
-- overlap).
--
-- after_xid, after_seq is the endpoint's place in the event feed: every
-- event up to it that the endpoint subscribes to has a delivery row. The
-- fan-out moves it forward under the feed's watermark (the sync walk's
-- rule), so no event is skipped; a disabled endpoint keeps its place.
CREATE TABLE webhook_endpoints (
    workspace_id         uuid NOT NULL REFERENCES workspaces (id),
    id                   uuid NOT NULL,
    client_id            uuid NOT NULL,
    url                  text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    event_types          text[] NOT NULL CHECK (cardinality(event_types) > 0),
    description          text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    status               text NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled')),
    disabled_reason      text CHECK (disabled_reason IN ('manual', 'failing', 'gone', 'client_revoked', 'admin')),
    secret               text NOT NULL,
    previous_secret      text,
    previous_expires_at  timestamptz,
    after_xid            bigint NOT NULL,
    after_seq            bigint NOT NULL,
    last_success_at      timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, id),
    FOREIGN KEY (workspace_id, client_id) REFERENCES api_clients (workspace_id, id),
    CHECK ((status = 'disabled') = (disabled_reason IS NOT NULL))
);

CREATE INDEX webhook_endpoints_client ON webhook_endpoints (workspace_id, client_id, created_at, id);
CREATE INDEX webhook_endpoints_enabled ON webhook_endpoints (id) WHERE status = 'enabled';

-- One row per (endpoint, event) to deliver. status: pending (to send, or
-- being sent while lease_until is in the future), succeeded, failed (given
-- up at the end of the schedule). record_id orders the events of one
-- record: a delivery is sent only when no earlier pending one of the same
-- record and endpoint is left.
CREATE TABLE webhook_deliveries (
    workspace_id     uuid NOT NULL,
    endpoint_id      uuid NOT NULL,
    event_xid        bigint NOT NULL,
    event_seq        bigint NOT NULL,
    event_id         uuid NOT NULL,
    event_type       text NOT NULL,
    record_id        uuid NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts         int NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    first_attempt_at timestamptz,
    lease_until      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, endpoint_id, event_xid, event_seq),
    FOREIGN KEY (workspace_id, endpoint_id) REFERENCES webhook_endpoints (workspace_id, id) ON DELETE CASCADE
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_record ON webhook_deliveries (workspace_id, endpoint_id, record_id, event_xid, event_seq)
    WHERE status = 'pending';

-- The delivery log: one row per attempt, newest first by id.
CREATE TABLE webhook_attempts (
    workspace_id     uuid NOT NULL,
    endpoint_id      uuid NOT NULL,
    id               bigint GENERATED ALWAYS AS IDENTITY,
    event_id         uuid NOT NULL,
    event_type       text NOT NULL,
    attempt          int NOT NULL,
    status           text NOT NULL CHECK (status IN ('succeeded', 'failed', 'pending')),
    response_status  int,
    duration_ms      int NOT NULL,
    error            text,
    at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, endpoint_id, id),
    FOREIGN KEY (workspace_id, endpoint_id) REFERENCES webhook_endpoints (workspace_id, id) ON DELETE CASCADE
);

CREATE INDEX webhook_attempts_at ON webhook_attempts USING brin (at);

-- webhook_claimed is the row type of webhook_claim: the delivery, its
-- endpoint's url and secrets, and the event to send. A table no row ever
-- enters, so that sqlc knows the columns (as lead_create_outcome).
CREATE TABLE webhook_claimed (
    workspace_id uuid NOT NULL, endpoint_id uuid NOT NULL, event_xid bigint NOT NULL, event_seq bigint NOT NULL,
    event_id uuid NOT NULL, event_type text NOT NULL, record_id uuid NOT NULL, attempts int NOT NULL,
    lease_until timestamptz NOT NULL, url text NOT NULL, secret text NOT NULL, previous_secret text,
    previous_expires_at timestamptz, object jsonb, changed text[], created_at timestamptz NOT NULL,
    CHECK (false));

-- webhook_fanout moves enabled endpoints forward in the event feed: for
-- each (at most p_endpoints, skipping those another replica is moving),
-- the events after its place and below the feed's watermark, at most
-- p_events, get a delivery row when the endpoint subscribes to their type,
-- and its place moves to the last of them. It returns the rows made.
-- +goose StatementBegin
CREATE FUNCTION webhook_fanout(p_endpoints int, p_events int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    horizon bigint := partner_sync_horizon();
    ep record;
    made int;
    total int := 0;
    lx bigint;
    ls bigint;
BEGIN
    FOR ep IN SELECT w.workspace_id, w.id, w.event_types, w.after_xid, w.after_seq FROM webhook_endpoints w
              WHERE w.status = 'enabled' AND EXISTS (
                  SELECT 1 FROM events e WHERE e.workspace_id = w.workspace_id AND e.change_xid < horizon
                    AND (e.change_xid, e.seq) > (w.after_xid, w.after_seq))
              LIMIT p_endpoints FOR UPDATE OF w SKIP LOCKED LOOP
        WITH ev AS (
            SELECT e.change_xid, e.seq, e.id, e.type, e.record_id FROM events e
            WHERE e.workspace_id = ep.workspace_id AND e.change_xid < horizon
              AND (e.change_xid, e.seq) > (ep.after_xid, ep.after_seq)
            ORDER BY e.change_xid, e.seq
            LIMIT p_events
        ), ins AS (
            INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_xid, event_seq, event_id, event_type, record_id)
            SELECT ep.workspace_id, ep.id, ev.change_xid, ev.seq, ev.id, ev.type, ev.record_id
            FROM ev WHERE ev.type = ANY (ep.event_types)
            ON CONFLICT DO NOTHING
            RETURNING 1
        ), last AS (
            SELECT ev.change_xid, ev.seq FROM ev ORDER BY ev.change_xid DESC, ev.seq DESC LIMIT 1
        )
        SELECT (SELECT count(*) FROM ins), (SELECT change_xid FROM last), (SELECT seq FROM last) INTO made, lx, ls;
        IF lx IS NOT NULL THEN
            UPDATE webhook_endpoints SET after_xid = lx, after_seq = ls
            WHERE workspace_id = ep.workspace_id AND id = ep.id;
        END IF;
        total := total + made;
    END LOOP;
    RETURN total;
END
$$;
-- +goose StatementEnd

-- webhook_claim leases due deliveries to the caller for p_lease_ms: at
-- most p_max, at most p_per_endpoint in flight per endpoint (leases of
-- other replicas count), and only the oldest pending delivery of each
-- record and endpoint (per-record order). Rows another replica is
-- claiming are skipped. A delivery of a type its client can no longer read
-- is dropped instead (scopes are checked again at delivery); the endpoints
-- of clients that are not active wait.
-- +goose StatementBegin
CREATE FUNCTION webhook_claim(p_lease_ms int, p_per_endpoint int, p_max int)
RETURNS SETOF webhook_claimed LANGUAGE plpgsql AS $$
DECLARE
    r record;
    c webhook_claimed;
    inflight jsonb := '{}';
    n int;
    taken int := 0;
BEGIN
    FOR r IN
        SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq, d.event_type, cl.scopes
        FROM webhook_deliveries d
        JOIN webhook_endpoints w ON w.workspace_id = d.workspace_id AND w.id = d.endpoint_id AND w.status = 'enabled'
        JOIN api_clients cl ON cl.workspace_id = w.workspace_id AND cl.id = w.client_id AND cl.status = 'active'
        WHERE d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until <= now())
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
                          WHERE p.workspace_id = d.workspace_id AND p.endpoint_id = d.endpoint_id
                            AND p.record_id = d.record_id AND p.status = 'pending'
                            AND (p.event_xid, p.event_seq) < (d.event_xid, d.event_seq))
        ORDER BY d.next_attempt_at, d.event_xid, d.event_seq
        LIMIT p_max * 4
        FOR UPDATE OF d SKIP LOCKED
    LOOP
        IF NOT ((CASE WHEN r.event_type LIKE 'contact.%' THEN 'contacts:read' ELSE 'leads:read' END) = ANY (r.scopes)) THEN
            DELETE FROM webhook_deliveries
            WHERE workspace_id = r.workspace_id AND endpoint_id = r.endpoint_id
              AND event_xid = r.event_xid AND event_seq = r.event_seq;
            CONTINUE;
        END IF;
        n := (inflight ->> r.endpoint_id::text)::int;
        IF n IS NULL THEN
            SELECT count(*) INTO n FROM webhook_deliveries f
            WHERE f.workspace_id = r.workspace_id AND f.endpoint_id = r.endpoint_id
              AND f.status = 'pending' AND f.lease_until > now();
        END IF;
        CONTINUE WHEN n >= p_per_endpoint;
        inflight := jsonb_set(inflight, ARRAY[r.endpoint_id::text], to_jsonb(n + 1));
        UPDATE webhook_deliveries d
        SET lease_until = clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0),
            attempts = d.attempts + 1, first_attempt_at = coalesce(d.first_attempt_at, now())
        WHERE d.workspace_id = r.workspace_id AND d.endpoint_id = r.endpoint_id
          AND d.event_xid = r.event_xid AND d.event_seq = r.event_seq;
        SELECT d.workspace_id, d.endpoint_id, d.event_xid, d.event_seq, d.event_id, d.event_type, d.record_id,
               d.attempts, d.lease_until, w.url, w.secret,
               CASE WHEN w.previous_expires_at > now() THEN w.previous_secret END, w.previous_expires_at,
               e.object, e.changed, coalesce(e.created_at, d.created_at)
        INTO c
        FROM webhook_deliveries d
        JOIN webhook_endpoints w ON w.workspace_id = d.workspace_id AND w.id = d.endpoint_id
        LEFT JOIN events e ON e.workspace_id = d.workspace_id AND e.change_xid = d.event_xid AND e.seq = d.event_seq
        WHERE d.workspace_id = r.workspace_id AND d.endpoint_id = r.endpoint_id
          AND d.event_xid = r.event_xid AND d.event_seq = r.event_seq;
        RETURN NEXT c;
        taken := taken + 1;
        EXIT WHEN taken >= p_max;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- webhook_record ends an attempt that still holds its lease (p_attempts
-- is the attempt it was claimed as; a replay or a second claim since made
-- it stale, and then nothing changes): p_outcome 'succeeded', 'retry' (at
-- p_next), 'failed' (the schedule ended) or 'gone' (410: the endpoint is
-- disabled at once). The attempt goes to the delivery log. An endpoint
-- whose delivery was given up with no success since that delivery's first
-- attempt has failed for a whole schedule: it is disabled ('failing').
-- +goose StatementBegin
CREATE FUNCTION webhook_record(p_workspace_id uuid, p_endpoint_id uuid, p_xid bigint, p_seq bigint, p_attempts int,
                               p_outcome text, p_next timestamptz, p_response_status int, p_duration_ms int,
                               p_error text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    d webhook_deliveries;
BEGIN
    UPDATE webhook_deliveries
    SET status = CASE p_outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
        next_attempt_at = coalesce(p_next, next_attempt_at), lease_until = NULL
    WHERE workspace_id = p_workspace_id AND endpoint_id = p_endpoint_id AND event_xid = p_xid AND event_seq = p_seq
      AND attempts = p_attempts AND status = 'pending'
    RETURNING * INTO d;
    IF d.endpoint_id IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status,
                                  duration_ms, error)
    VALUES (p_workspace_id, p_endpoint_id, d.event_id, d.event_type, p_attempts,
            CASE p_outcome WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            p_response_status, p_duration_ms, p_error);
    IF p_outcome = 'succeeded' THEN
        UPDATE webhook_endpoints SET last_success_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id
          AND (last_success_at IS NULL OR last_success_at < now() - interval '1 second');
    ELSIF p_outcome = 'gone' THEN
        UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', updated_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id AND status = 'enabled';
    ELSIF p_outcome = 'failed' THEN
        UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'failing', updated_at = now()
        WHERE workspace_id = p_workspace_id AND id = p_endpoint_id AND status = 'enabled'
          AND (last_success_at IS NULL OR last_success_at < d.first_attempt_at);
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION webhook_record(uuid, uuid, bigint, bigint, int, text, timestamptz, int, int, text);
DROP FUNCTION webhook_claim(int, int, int);
DROP FUNCTION webhook_fanout(int, int);
DROP TABLE webhook_claimed;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
