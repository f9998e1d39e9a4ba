-- kept for release 1.1.0: only the previous release calls it; drop it once PREVIOUS_RELEASE moves past 1.1.0.
-- webhook_claim_due is 1.1.0's claim: webhook_claim_sealed without the
-- sealed secrets, and without the endpoints whose plaintext secrets are
-- gone (a 1.1.0 replica cannot sign for them; a 1.2.0 replica does).
CREATE OR REPLACE FUNCTION webhook_claim_due(p_lease_ms int, p_per_endpoint int, p_max int, p_types text[], p_scopes text[],
                                             p_pool int, p_min_share int, p_busy_ws uuid[], p_busy_n int[])
RETURNS SETOF webhook_claimed LANGUAGE sql AS $$
    SELECT c.workspace_id, c.endpoint_id, c.event_xid, c.event_seq, c.event_id, c.event_type, c.record_id, c.attempts,
           c.lease_until, c.url, c.secret, c.previous_secret, c.previous_expires_at, c.object, c.changed, c.created_at
    FROM webhook_claim_sealed(p_lease_ms, p_per_endpoint, p_max, p_types, p_scopes, p_pool, p_min_share, p_busy_ws, p_busy_n, true) AS c;
$$;
