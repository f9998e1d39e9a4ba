package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbsqlc"
)

// valueTurns, valueWarm and valueTurn are the turns of (e10) and (f10)
// against their baselines: 8 turns of 0.5 s warm-up + 2 s a side, 40 s a
// line, about what the two measurements of 12 s each took before.
const (
	valueTurns = 8
	valueWarm  = 500 * time.Millisecond
	valueTurn  = 2 * time.Second
)

// benchFields are the ten lead custom fields of scenarios (e10) and
// (f10): one of each type, and a second text field, as a lead source
// brings them (budget, preferred time, product interest, …).
var benchFields = []struct {
	key, typ string
	options  []map[string]string
	value    string // the JSON value every lead sends
}{
	{"budget", "number", nil, `25000`},
	{"interest", "select", []map[string]string{{"value": "crm", "label": "CRM"}, {"value": "erp", "label": "ERP"}}, `"crm"`},
	{"channels", "multiselect", []map[string]string{{"value": "email", "label": "Email"}, {"value": "phone", "label": "Phone"}, {"value": "sms", "label": "SMS"}}, `["phone","email"]`},
	{"newsletter", "boolean", nil, `true`},
	{"start_date", "date", nil, `"2027-01-15"`},
	{"call_at", "datetime", nil, `"2026-12-01T09:30:00Z"`},
	{"website", "url", nil, `"https://example.com/pricing"`},
	{"billing_email", "email", nil, `"billing@example.com"`},
	{"notes", "text", nil, `"Wants a demo next week, prefers mornings"`},
	{"team_size", "text", nil, `"11-50"`},
}

// benchCustomValues is the customFields member every lead of (e10) and
// (f10) sends.
var benchCustomValues = func() string {
	var b strings.Builder
	b.WriteString(`{`)
	for i, f := range benchFields {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%s", f.key, f.value)
	}
	b.WriteString(`}`)
	return b.String()
}()

// defineBenchFields defines benchFields on the workspace's leads.
func defineBenchFields(ctx context.Context, d *pgxpool.Pool, ws uuid.UUID) error {
	for _, f := range benchFields {
		arg := dbsqlc.CustomFieldCreateParams{WorkspaceID: ws, ID: uuid.New(), Object: "lead", Key: f.key, Label: f.key, Type: f.typ}
		if f.options != nil {
			b, err := json.Marshal(f.options)
			if err != nil {
				return err
			}
			arg.Options = b
		}
		if _, err := db.Q.CustomFieldCreate(ctx, d, arg); err != nil {
			return fmt.Errorf("define custom field %s: %w", f.key, err)
		}
	}
	return nil
}

// customLeadRequest is scenario (e)'s lead create with the ten custom
// values.
func customLeadRequest(base, token string, seq *atomic.Int64) request {
	return func(int64) (*http.Request, error) {
		i := seq.Add(1)
		body := fmt.Sprintf(`{"contact":{"email":"lead-%d@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"},"customFields":%s}`,
			i%1000, benchCustomValues)
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/leads", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "custom-"+strconv.FormatInt(i, 10)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		return req, nil
	}
}

// customBatchRequest is scenario (f)'s batch with the ten custom values
// in every lead.
func customBatchRequest(base, token string, seq *atomic.Int64) request {
	return func(int64) (*http.Request, error) {
		n := seq.Add(1)
		var b strings.Builder
		b.WriteString(`{"leads":[`)
		for j := range batchSize {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"contact":{"email":"cbatch-%d@bench.test","firstName":"Lee"},"source":"web_form","value":{"amount":1000,"currency":"USD"},"externalId":"cform-%d-%d","customFields":%s}`,
				(n*batchSize+int64(j))%5000, n, j, benchCustomValues)
		}
		b.WriteString("]}")
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/leads/batch", strings.NewReader(b.String()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "custom-batch-"+strconv.FormatInt(n, 10)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		return req, nil
	}
}
