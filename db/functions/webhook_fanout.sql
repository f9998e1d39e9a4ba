-- kept for release 1.0.0: only the previous release calls it; drop it once PREVIOUS_RELEASE moves past 1.0.0.
-- webhook_fanout is the previous release's fan-out: the same as this
-- release's (webhook_fanout_bounded), with the backlog bound at its
-- default of 100,000 pending deliveries an endpoint and an endpoint taken
-- for stalled after 12 s without a success (the default delivery timeout
-- of 10 s, and 2 s more), so that the bound holds while that release
-- serves during an upgrade too.
CREATE OR REPLACE FUNCTION webhook_fanout(p_endpoints int, p_events int) RETURNS int LANGUAGE sql AS $$
    SELECT f.moved FROM webhook_fanout_bounded(p_endpoints, p_events, 100000, 12000) AS f;
$$;
