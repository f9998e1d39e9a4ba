package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svat/partnerapi/internal/records/opaqueid"
)

// baselines are the bare handlers each scenario is compared with, run in
// a process of their own like the server.
func baselines(pool *pgxpool.Pool, meJSON []byte, workspace [16]byte) http.Handler {
	mux := http.NewServeMux()

	// (a)/(e) baseline: one INSERT of a row the size of an access token row,
	// committed, and a small JSON answer.
	mux.HandleFunc("POST /baseline/insert", func(w http.ResponseWriter, r *http.Request) {
		var hash [32]byte
		_, _ = rand.Read(hash[:])
		now := time.Now()
		_, err := pool.Exec(r.Context(), `INSERT INTO bench_rows (token_hash, workspace_id, client_id, scopes, created_at, expires_at)
			VALUES ($1, $2, $2, $3, $4, $5)`, hash[:], workspace, []string{"contacts:read", "leads:read"}, now, now.Add(time.Hour))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"svat_0000000000000000000000000000000000000000000000000","token_type":"Bearer","expires_in":31536000,"scope":"contacts:read leads:read"}`))
	})

	// (b)/(c) baseline: the same JSON as GET /api/v1/me, no auth.
	mux.HandleFunc("GET /baseline/me", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(meJSON)
	})

	// (d) baseline: the same SQL as GET /api/v1/contacts?limit=100, with
	// pgx, encoded with encoding/json.
	type contact struct {
		ID          string    `json:"id"`
		Email       *string   `json:"email,omitempty"`
		Phone       *string   `json:"phone,omitempty"`
		FirstName   *string   `json:"firstName,omitempty"`
		LastName    *string   `json:"lastName,omitempty"`
		CompanyName *string   `json:"companyName,omitempty"`
		JobTitle    *string   `json:"jobTitle,omitempty"`
		ExternalID  *string   `json:"externalId,omitempty"`
		CreatedAt   time.Time `json:"createdAt"`
		UpdatedAt   time.Time `json:"updatedAt"`
	}
	mux.HandleFunc("GET /baseline/contacts", func(w http.ResponseWriter, r *http.Request) {
		rows, err := pool.Query(r.Context(), `SELECT id, email, phone, first_name, last_name, company_name, job_title, external_id, created_at, updated_at
			FROM contacts WHERE workspace_id = $1 ORDER BY created_at DESC, id DESC LIMIT 101`, workspace)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		var out struct {
			Contacts   []contact         `json:"contacts"`
			Pagination map[string]string `json:"pagination"`
		}
		for rows.Next() {
			var c contact
			var id uuid.UUID
			if err := rows.Scan(&id, &c.Email, &c.Phone, &c.FirstName, &c.LastName, &c.CompanyName, &c.JobTitle, &c.ExternalID, &c.CreatedAt, &c.UpdatedAt); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			c.ID = opaqueid.Format(opaqueid.Contact, id)
			out.Contacts = append(out.Contacts, c)
		}
		if rows.Err() != nil {
			http.Error(w, rows.Err().Error(), 500)
			return
		}
		out.Contacts = out.Contacts[:min(100, len(out.Contacts))]
		out.Pagination = map[string]string{"nextCursor": "AQAGYNeHVOFPAaIB7WWaeUSCGnzzxR3FOy0q8Wsim_75nWNl5_EC4oE"}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	return mux
}

func createBenchTable(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_rows (
		token_hash bytea PRIMARY KEY, workspace_id uuid NOT NULL, client_id uuid NOT NULL,
		scopes text[] NOT NULL, created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL, revoked_at timestamptz)`)
	return err
}
