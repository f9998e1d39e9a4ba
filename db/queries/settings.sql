-- Queries of the workspace settings page (service/settings) and of the
-- admin RPC that makes its sign-in links (CreateSignInLink). Times come
-- from the service's clock (@now), so that tests can move it.

-- SettingsMemberByID finds a member by id alone, for CreateSignInLink: the
-- operator (or the CRM) names a member, and the row says its workspace.
-- name: SettingsMemberByID :one
SELECT * FROM members WHERE id = @id;

-- name: SettingsSignInCodeCreate :exec
INSERT INTO settings_sign_in_codes (code_hash, workspace_id, member_id, created_at, expires_at)
VALUES (@code_hash, @workspace_id, @member_id, @now, @expires_at);

-- SettingsSignInCodeRedeem uses a code once: the one UPDATE that finds it
-- unused and unexpired marks it used and returns its member, so two
-- concurrent redemptions cannot both succeed.
-- name: SettingsSignInCodeRedeem :one
UPDATE settings_sign_in_codes SET used_at = @now::timestamptz
WHERE code_hash = @code_hash AND used_at IS NULL AND expires_at > @now
RETURNING workspace_id, member_id;

-- SettingsSignInCodePeek finds a usable code (unused, unexpired) without
-- using it, and its member's email: the "Continue as <email>?" question a
-- browser signed in as another member gets before the code is redeemed
-- (issue 34, item 7). No row: the code does not work.
-- name: SettingsSignInCodePeek :one
SELECT c.workspace_id, c.member_id, m.email
FROM settings_sign_in_codes c
JOIN members m ON m.workspace_id = c.workspace_id AND m.id = c.member_id
WHERE c.code_hash = @code_hash AND c.used_at IS NULL AND c.expires_at > @now;

-- SettingsSignInCodeDeleteExpired forgets codes that can no longer be used
-- (expired a day ago), bounded per call.
-- name: SettingsSignInCodeDeleteExpired :execrows
DELETE FROM settings_sign_in_codes
WHERE code_hash IN (
    SELECT c.code_hash FROM settings_sign_in_codes c
    WHERE c.expires_at < @before
    LIMIT @max_rows
);

-- name: SettingsSessionCreate :exec
INSERT INTO settings_sessions (token_hash, workspace_id, member_id, created_at, expires_at, last_seen_at)
VALUES (@token_hash, @workspace_id, @member_id, @now, @expires_at, @now);

-- SettingsSessionTouch finds a live session (before its absolute expiry
-- and seen since idle_after) and records this request, in one statement;
-- it also returns whether the member is still approved with settings
-- access. No row: there is no such live session.
-- name: SettingsSessionTouch :one
UPDATE settings_sessions s SET last_seen_at = @now
FROM members m
WHERE s.token_hash = @token_hash
  AND s.expires_at > @now
  AND s.last_seen_at > @idle_after
  AND m.workspace_id = s.workspace_id AND m.id = s.member_id
RETURNING s.workspace_id, s.member_id, m.email, m.approved, m.settings_access;

-- name: SettingsSessionDelete :exec
DELETE FROM settings_sessions WHERE token_hash = @token_hash;

-- SettingsSessionDeleteOfMember ends every session of a member, when the
-- member turns out to have lost access.
-- name: SettingsSessionDeleteOfMember :exec
DELETE FROM settings_sessions WHERE workspace_id = @workspace_id AND member_id = @member_id;

-- SettingsSessionDeleteExpired forgets sessions that have ended (past
-- their absolute expiry or idle since idle_before), bounded per call.
-- name: SettingsSessionDeleteExpired :execrows
DELETE FROM settings_sessions
WHERE token_hash IN (
    SELECT e.token_hash FROM settings_sessions e
    WHERE e.expires_at < @now OR e.last_seen_at < @idle_before
    LIMIT @max_rows
);

-- SettingsSessionSpendForm records that the session sent the form
-- form_id, unless that is the form it sent last (migration 00118): of two
-- sends of one form at once, the second waits for the first's row lock,
-- then finds the id and updates nothing. No row: the form was sent.
-- name: SettingsSessionSpendForm :execrows
UPDATE settings_sessions SET last_form_id = @form_id::text
WHERE token_hash = @token_hash AND last_form_id IS DISTINCT FROM @form_id::text;

-- SettingsSessionUnspendForm takes back the form id a send recorded, when
-- that send was refused for its fields and changed nothing: the corrected
-- form may then be sent.
-- name: SettingsSessionUnspendForm :exec
UPDATE settings_sessions SET last_form_id = NULL
WHERE token_hash = @token_hash AND last_form_id = @form_id::text;
