-- kept for release 1.1.0: only the previous release calls it; drop it once PREVIOUS_RELEASE moves past 1.1.0.
-- lead_create_set is lead_create_item_set for items without custom field
-- values, as release 1.1.0 sends them, answered as 1.1.0 reads them
-- (lead_create_outcome, which has no custom_fields).
CREATE OR REPLACE FUNCTION lead_create_set(p_workspace_id uuid, p_items lead_create_request[])
RETURNS SETOF lead_create_outcome LANGUAGE sql AS $$
    SELECT idx, err_code, err_constraint, existing_id, workspace_id, id, contact_id, title, status, source, campaign, message, value_amount, value_currency, external_id, created_at, updated_at, change_xid
    FROM lead_create_item_set(p_workspace_id,
        ARRAY(SELECT jsonb_populate_record(NULL::lead_create_item, to_jsonb(r)) FROM unnest(p_items) WITH ORDINALITY AS r
              ORDER BY ordinality));
$$;
