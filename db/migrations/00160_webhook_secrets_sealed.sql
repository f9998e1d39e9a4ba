-- +goose Up

-- Webhook secrets are encrypted at rest (issue 34, finding 9;
-- docs/security.md, "Webhook secrets at rest").
--
-- secret_sealed and previous_secret_sealed hold the secrets sealed by the
-- binary (AES-256-GCM under PARTNER_SECRET_KEY, bound to the workspace and
-- the endpoint: internal/security/sealed). The text columns keep a
-- plaintext copy only for release 1.1.0, which signs with them, while
-- webhook_secrets.plaintext_kept is true: `partnerapi migrate
-- --seal-webhook-secrets` turns it off once no 1.1.0 replica serves, and
-- the sweep then empties them (''; the columns are NOT NULL, and 1.1.0
-- reads them as text). A database with no endpoint yet has nothing for
-- 1.1.0 to sign with, so it is sealed only from the start.
ALTER TABLE webhook_endpoints ADD COLUMN secret_sealed bytea;
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_sealed bytea;

CREATE TABLE webhook_secrets (
    one            boolean PRIMARY KEY DEFAULT true CHECK (one),
    plaintext_kept boolean NOT NULL
);
INSERT INTO webhook_secrets (plaintext_kept) SELECT EXISTS (SELECT 1 FROM webhook_endpoints);

-- webhook_claimed_sealed is the row type of webhook_claim_sealed: 1.1.0's
-- webhook_claimed and the sealed secrets. A table no row ever enters.
CREATE TABLE webhook_claimed_sealed (
    workspace_id uuid NOT NULL, endpoint_id uuid NOT NULL, event_xid bigint NOT NULL, event_seq bigint NOT NULL,
    -- attempts is int as in webhook_claimed and webhook_deliveries (a
    -- delivery's attempts never pass the schedule's few):
    -- squawk-ignore prefer-bigint-over-int
    event_id uuid NOT NULL, event_type text NOT NULL, record_id uuid NOT NULL, attempts int NOT NULL,
    lease_until timestamptz NOT NULL, url text NOT NULL, secret text NOT NULL, previous_secret text,
    previous_expires_at timestamptz, object jsonb, changed text[], created_at timestamptz NOT NULL,
    secret_sealed bytea, previous_secret_sealed bytea,
    CHECK (false));

-- A 1.1.0 replica's rotation sets the text columns only: the sealed ones
-- would then hold the retired secret. The trigger empties a sealed column
-- whose text column an UPDATE changed without it, so that the text wins
-- until the sweep seals it (its live source: db/functions/webhook_secret_unseal_stale.sql).
-- +goose StatementBegin
CREATE FUNCTION webhook_secret_unseal_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.secret IS DISTINCT FROM OLD.secret AND NEW.secret_sealed IS NOT DISTINCT FROM OLD.secret_sealed THEN
        NEW.secret_sealed := NULL;
    END IF;
    IF NEW.previous_secret IS DISTINCT FROM OLD.previous_secret
       AND NEW.previous_secret_sealed IS NOT DISTINCT FROM OLD.previous_secret_sealed THEN
        NEW.previous_secret_sealed := NULL;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER webhook_endpoints_unseal_stale BEFORE UPDATE OF secret, previous_secret ON webhook_endpoints
    FOR EACH ROW EXECUTE FUNCTION webhook_secret_unseal_stale();

-- No stored idempotent answer keeps a webhook secret: every whsec_ secret
-- in an answer of the endpoints' paths is replaced, as it is stored, by
-- its digest ('sha256' and the base64 of SHA-256 of the secret: as long
-- as the secret, so the stored protobuf stays valid), whichever release
-- stores it. A replay compares the digest with the endpoint's secret now
-- (service/webhook, replayed). Its live source:
-- db/functions/idempotency_redact_secrets.sql.
-- +goose StatementBegin
CREATE FUNCTION idempotency_redact_secrets() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    at int := 1;
    i int;
    n int;
BEGIN
    LOOP
        i := position('\x77687365635f'::bytea IN substring(NEW.response FROM at)); -- 'whsec_'
        EXIT WHEN i = 0;
        i := at + i - 1;
        n := least(50, length(NEW.response) - i + 1);
        IF n = 50 THEN
            NEW.response := overlay(NEW.response PLACING
                convert_to('sha256' || encode(sha256(substring(NEW.response FROM i FOR 50)), 'base64'), 'UTF8')
                FROM i FOR 50);
        END IF;
        at := i + n;
    END LOOP;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER idempotency_keys_redact_secrets BEFORE INSERT OR UPDATE OF response ON idempotency_keys
    FOR EACH ROW WHEN (NEW.path LIKE '/api/v1/webhook-endpoints%') EXECUTE FUNCTION idempotency_redact_secrets();
UPDATE idempotency_keys SET response = response
WHERE path LIKE '/api/v1/webhook-endpoints%' AND position('\x77687365635f'::bytea IN response) > 0;

-- Only 1.0.0 called these; the previous release is 1.1.0 now.
DROP FUNCTION webhook_claim(int, int, int);
DROP FUNCTION webhook_fanout(int, int);
DROP FUNCTION webhook_record_many(uuid[], uuid[], bigint[], bigint[], int[], text[], timestamptz[], int[], int[], text[]);
DELETE FROM schema_functions WHERE name IN ('webhook_claim', 'webhook_fanout', 'webhook_record_many');

-- +goose Down
-- webhook_fanout calls webhook_fanout_bounded, which a function file makes
-- (absent when only the migrations ran).
SET LOCAL check_function_bodies = off;
DROP TRIGGER idempotency_keys_redact_secrets ON idempotency_keys;
DROP FUNCTION idempotency_redact_secrets();
DROP TRIGGER webhook_endpoints_unseal_stale ON webhook_endpoints;
DROP FUNCTION webhook_secret_unseal_stale();
DROP TABLE webhook_claimed_sealed;
DROP TABLE webhook_secrets;
ALTER TABLE webhook_endpoints DROP COLUMN previous_secret_sealed;
ALTER TABLE webhook_endpoints DROP COLUMN secret_sealed;
-- The functions 1.0.0 called, as they were (earlier Down sections drop them).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_claim(p_lease_ms int, p_per_endpoint int, p_max int)
RETURNS SETOF webhook_claimed LANGUAGE plpgsql AS $$
BEGIN
    -- An attempt, a claim or a fan-out lost to a crash is made again
    -- (at least once), so none waits for its commit to be flushed.
    PERFORM set_config('synchronous_commit', 'off', true);
    -- One statement for every endpoint: each enabled endpoint with a due
    -- delivery gets at most its free slots (its leased deliveries counted
    -- across replicas), from its due deliveries in due order, the first
    -- pending one of each record only; deliveries of an event type the
    -- client may no longer read are dropped; p_max bounds the whole.
    RETURN QUERY
    WITH ep AS (
        SELECT w.workspace_id, w.id, cl.scopes,
               p_per_endpoint - (SELECT count(*)::int FROM webhook_deliveries f
                                 WHERE f.workspace_id = w.workspace_id AND f.endpoint_id = w.id
                                   AND f.lease_until IS NOT NULL AND f.lease_until > now() AND f.status = 'pending') AS slots
        FROM webhook_endpoints w
        JOIN api_clients cl ON cl.workspace_id = w.workspace_id AND cl.id = w.client_id AND cl.status = 'active'
        WHERE w.status = 'enabled'
          AND (SELECT d.next_attempt_at FROM webhook_deliveries d
               WHERE d.workspace_id = w.workspace_id AND d.endpoint_id = w.id AND d.status = 'pending'
               ORDER BY d.next_attempt_at LIMIT 1) <= now()
    ), cand AS (
        SELECT c.workspace_id, c.endpoint_id, c.event_xid, c.event_seq, c.next_attempt_at, ep.slots,
               (CASE WHEN c.event_type LIKE 'contact.%' THEN 'contacts:read' ELSE 'leads:read' END) = ANY (ep.scopes) AS readable
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
    ), pick AS (
        SELECT x.workspace_id, x.endpoint_id, x.event_xid, x.event_seq FROM (
            SELECT c.*, row_number() OVER (PARTITION BY c.workspace_id, c.endpoint_id
                                           ORDER BY c.next_attempt_at, c.event_xid, c.event_seq) AS n
            FROM cand c WHERE c.readable) x
        WHERE x.n <= x.slots
        ORDER BY random()
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
           e.object, e.changed, coalesce(e.created_at, l.created_at)
    FROM leased l
    JOIN webhook_endpoints w ON w.workspace_id = l.workspace_id AND w.id = l.endpoint_id
    LEFT JOIN events e ON e.workspace_id = l.workspace_id AND e.change_xid = l.event_xid AND e.seq = l.event_seq;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
-- webhook_fanout is the previous release's fan-out: the same as this
-- release's (webhook_fanout_bounded), with the backlog bound at its
-- default of 100,000 pending deliveries an endpoint and an endpoint taken
-- for stalled after 12 s without a success (the default delivery timeout
-- of 10 s, and 2 s more), so that the bound holds while that release
-- serves during an upgrade too.
CREATE OR REPLACE FUNCTION webhook_fanout(p_endpoints int, p_events int) RETURNS int LANGUAGE sql AS $$
    SELECT f.moved FROM webhook_fanout_bounded(p_endpoints, p_events, 100000, 12000) AS f;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_record_many(p_w uuid[], p_e uuid[], p_x bigint[], p_s bigint[], p_a int[], p_o text[],
                                    p_n timestamptz[], p_r int[], p_d int[], p_er text[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    ok_w uuid[]; ok_e uuid[];
    gone_w uuid[]; gone_e uuid[];
    fail_w uuid[]; fail_e uuid[]; fail_first timestamptz[];
    n int;
BEGIN
    -- An attempt, a claim or a fan-out lost to a crash is made again
    -- (at least once), so none waits for its commit to be flushed.
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH t AS (
        SELECT * FROM unnest(p_w, p_e, p_x, p_s, p_a, p_o, p_n, p_r, p_d, p_er) AS t(w, e, x, s, a, o, nx, r, d, er)
    ), done AS (
        DELETE FROM webhook_deliveries d USING t
        WHERE t.o = 'succeeded' AND d.workspace_id = t.w AND d.endpoint_id = t.e
          AND d.event_xid = t.x AND d.event_seq = t.s AND d.attempts = t.a AND d.status = 'pending'
        RETURNING d.workspace_id, d.endpoint_id, d.event_id, d.event_type, d.first_attempt_at, t.a, t.o, t.r, t.d, t.er
    ), kept AS (
        UPDATE webhook_deliveries d
        SET status = CASE t.o WHEN 'retry' THEN 'pending' ELSE 'failed' END,
            next_attempt_at = CASE WHEN t.nx < '1900-01-01' THEN d.next_attempt_at ELSE t.nx END, lease_until = NULL
        FROM t
        WHERE t.o <> 'succeeded' AND d.workspace_id = t.w AND d.endpoint_id = t.e
          AND d.event_xid = t.x AND d.event_seq = t.s AND d.attempts = t.a AND d.status = 'pending'
        RETURNING d.workspace_id, d.endpoint_id, d.event_id, d.event_type, d.first_attempt_at, t.a, t.o, t.r, t.d, t.er
    ), ended AS (
        SELECT * FROM done UNION ALL SELECT * FROM kept
    ), logged AS (
        INSERT INTO webhook_attempts (workspace_id, endpoint_id, event_id, event_type, attempt, status, response_status,
                                      duration_ms, error)
        SELECT workspace_id, endpoint_id, event_id, event_type, a,
               CASE o WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'pending' ELSE 'failed' END,
               nullif(r, 0), d, nullif(er, '')
        FROM ended
    )
    SELECT count(*)::int,
           array_agg(workspace_id) FILTER (WHERE o = 'succeeded'), array_agg(endpoint_id) FILTER (WHERE o = 'succeeded'),
           array_agg(workspace_id) FILTER (WHERE o = 'gone'), array_agg(endpoint_id) FILTER (WHERE o = 'gone'),
           array_agg(workspace_id) FILTER (WHERE o = 'failed'), array_agg(endpoint_id) FILTER (WHERE o = 'failed'),
           array_agg(first_attempt_at) FILTER (WHERE o = 'failed')
    INTO n, ok_w, ok_e, gone_w, gone_e, fail_w, fail_e, fail_first
    FROM ended;
    IF ok_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET last_success_at = now()
        FROM (SELECT DISTINCT u.w, u.e FROM unnest(ok_w, ok_e) AS u(w, e)) u
        WHERE w.workspace_id = u.w AND w.id = u.e
          AND (w.last_success_at IS NULL OR w.last_success_at < now() - interval '1 second');
    END IF;
    IF gone_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET status = 'disabled', disabled_reason = 'gone', updated_at = now()
        FROM (SELECT DISTINCT u.w, u.e FROM unnest(gone_w, gone_e) AS u(w, e)) u
        WHERE w.workspace_id = u.w AND w.id = u.e AND w.status = 'enabled';
    END IF;
    IF fail_w IS NOT NULL THEN
        UPDATE webhook_endpoints w SET status = 'disabled', disabled_reason = 'failing', updated_at = now()
        FROM (SELECT u.w, u.e, max(u.f) AS f FROM unnest(fail_w, fail_e, fail_first) AS u(w, e, f) GROUP BY u.w, u.e) u
        WHERE w.workspace_id = u.w AND w.id = u.e AND w.status = 'enabled'
          AND (w.last_success_at IS NULL OR w.last_success_at < u.f);
    END IF;
    RETURN n;
END
$$;
-- +goose StatementEnd
