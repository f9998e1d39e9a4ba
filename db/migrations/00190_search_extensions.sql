-- +goose Up

-- Search and custom field filters (issue 35; product.md "Lists": q and
-- customFields.<key>), served by GIN indexes (migration 00191) built on
-- PostgreSQL's contrib extensions, which ship with the server package:
-- pg_trgm (trigram indexes that serve LIKE '%word%'), unaccent (accents
-- folded away) and btree_gin (a GIN operator class for uuid, so that
-- workspace_id leads each index and no search reads another workspace's
-- entries). All three are trusted: the database's owner, the role the
-- service migrates as (not a superuser), may create them. They live in a
-- schema of their own, so that public holds our code alone
-- (TestFunctionFilesAreTheLiveCode).
CREATE SCHEMA IF NOT EXISTS extensions;
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS unaccent WITH SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS btree_gin WITH SCHEMA extensions;

-- The search's expressions, in schema search. They are schema, not live
-- code (db/functions): the indexes of migration 00191 are built on them,
-- so a body must never change (the indexes would disagree with the
-- queries); a change is a new function and a new index. IMMUTABLE, as an
-- index expression must be: unaccent(regdictionary, text) is only STABLE
-- because the one-argument form looks its dictionary up by search_path,
-- and these name theirs.
CREATE SCHEMA IF NOT EXISTS search;

-- search.fold is text as the search compares it: accents folded away,
-- then lower-cased ("Élodie" is "elodie").
CREATE FUNCTION search.fold(s text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT lower(extensions.unaccent('extensions.unaccent'::regdictionary, s)) $$;

-- search.contact_text is what q searches in a contact: its fields, folded
-- and joined by a newline. A word of q holds no white space, so a word
-- found in it lies within one field.
CREATE FUNCTION search.contact_text(email text, first_name text, last_name text, company_name text, phone text,
                                    external_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT search.fold(concat_ws(E'\n', email, first_name, last_name, company_name, phone, external_id)) $$;

-- search.lead_text is search.contact_text of a lead.
CREATE FUNCTION search.lead_text(title text, campaign text, source text, external_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT search.fold(concat_ws(E'\n', title, campaign, source, external_id)) $$;

-- search.like_pattern is the LIKE pattern of one word of q: folded, its
-- LIKE characters (\ % _) taken literally, anywhere in the text.
CREATE FUNCTION search.like_pattern(word text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT '%' || replace(replace(replace(search.fold(word), '\', '\\'), '%', '\%'), '_', '\_') || '%' $$;

-- +goose Down
DROP FUNCTION search.like_pattern(text);
DROP FUNCTION search.lead_text(text, text, text, text);
DROP FUNCTION search.contact_text(text, text, text, text, text, text);
DROP FUNCTION search.fold(text);
DROP SCHEMA search;
DROP EXTENSION btree_gin;
DROP EXTENSION unaccent;
DROP EXTENSION pg_trgm;
DROP SCHEMA extensions;
