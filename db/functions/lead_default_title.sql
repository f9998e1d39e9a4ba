-- lead_default_title is the title of a lead sent without one: its
-- contact's "First Last", else its email or phone. It is STABLE, as
-- concat_ws is, so that the planner inlines it into the statements that
-- use it instead of running the SQL-function executor for every row.
CREATE OR REPLACE FUNCTION lead_default_title(first_name text, last_name text, email text, phone text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(concat_ws(' ', first_name, last_name), ''), email, phone, 'Lead')
$$;
