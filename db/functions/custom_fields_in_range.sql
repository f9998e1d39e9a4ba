-- custom_fields_in_range reports whether a record's custom field values
-- (its custom_fields column) meet every customFields.<key>.gte and .lte
-- filter of a list (product.md, "Lists"): the filters are parallel arrays,
-- one element a key, with the field's type (number, date or datetime) and
-- the bounds as the API parsed them ('' for none). Values are compared as
-- their type, not as text: 10 is above 9, and datetimes as instants. A
-- record without the key, or with a value of another JSON type, is out of
-- range. The list queries skip it when there are no such filters.
CREATE OR REPLACE FUNCTION custom_fields_in_range(fields jsonb, keys text[], types text[], gte text[], lte text[])
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT NOT EXISTS (
    SELECT 1
    FROM unnest(keys, types, gte, lte) AS r(k, t, lo, hi)
    WHERE NOT coalesce(
        CASE
            WHEN r.t = 'number' AND jsonb_typeof(fields -> r.k) = 'number' THEN
                coalesce((fields -> r.k)::numeric >= nullif(r.lo, '')::numeric, true)
                AND coalesce((fields -> r.k)::numeric <= nullif(r.hi, '')::numeric, true)
            WHEN r.t = 'date' AND jsonb_typeof(fields -> r.k) = 'string' THEN
                coalesce((fields ->> r.k)::date >= nullif(r.lo, '')::date, true)
                AND coalesce((fields ->> r.k)::date <= nullif(r.hi, '')::date, true)
            WHEN r.t = 'datetime' AND jsonb_typeof(fields -> r.k) = 'string' THEN
                coalesce((fields ->> r.k)::timestamptz >= nullif(r.lo, '')::timestamptz, true)
                AND coalesce((fields ->> r.k)::timestamptz <= nullif(r.hi, '')::timestamptz, true)
        END, false))
$$;
