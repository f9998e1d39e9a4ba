-- +goose Up

-- A settings form that shows a secret ("Create API client", "Rotate
-- secret") acts once per form id. The browser's cookie of spent form ids
-- (service/settings/resubmit.go) stops a reload or Back and a resubmission,
-- but two sends of the same form at once (a double click) both carried
-- the cookie from before either answer, and both created a client. The
-- session now records the form id it last sent, by one conditional UPDATE
-- of its row (SettingsSessionSpendForm): of two sends at once, the second
-- waits for the first's row lock, sees the id, and is refused.
ALTER TABLE settings_sessions ADD COLUMN last_form_id text;

-- +goose Down
ALTER TABLE settings_sessions DROP COLUMN last_form_id;
