-- +goose Up

-- The text q searches, as PL/pgSQL. search.contact_text and
-- search.lead_text (00190) are SQL functions that PostgreSQL cannot inline:
-- unaccent(regdictionary, text) and concat_ws are only STABLE. An index
-- expression of such a function runs the SQL-function executor, which
-- parses and plans the body again for every statement. A lead create is
-- one statement, so that cost fell on every row written: 100 µs of
-- PostgreSQL CPU per lead create, a quarter of the rate of 1.1.0 (make
-- bench, "(e) vs previous release"). PL/pgSQL keeps its plan for the
-- session and evaluates the body as a simple expression. The results
-- equal the SQL functions' (TestSearchTextFoldsAsBefore), and the
-- indexes move to these in 00211. Like every function of schema search,
-- a body never changes: the indexes would disagree with the queries.

-- search.contact_folded is what q searches in a contact: its fields joined
-- by a newline, accents folded away, lower-cased. A word of q holds no
-- white space, so a word found in it lies within one field.
-- +goose StatementBegin
CREATE FUNCTION search.contact_folded(email text, first_name text, last_name text, company_name text, phone text,
                                      external_id text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN lower(extensions.unaccent('extensions.unaccent'::regdictionary,
                                     concat_ws(E'\n', email, first_name, last_name, company_name, phone, external_id)));
END
$$;
-- +goose StatementEnd

-- search.lead_folded is search.contact_folded of a lead.
-- +goose StatementBegin
CREATE FUNCTION search.lead_folded(title text, campaign text, source text, external_id text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN lower(extensions.unaccent('extensions.unaccent'::regdictionary, concat_ws(E'\n', title, campaign, source, external_id)));
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION search.lead_folded(text, text, text, text);
DROP FUNCTION search.contact_folded(text, text, text, text, text, text);
