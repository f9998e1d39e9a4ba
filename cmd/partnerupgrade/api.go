package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// answer is one request's outcome; status 0 is a connection error, whose
// text is the body.
type answer struct {
	status   int
	body     []byte
	replayed bool // Idempotent-Replayed: true
}

// call is one request of the public API.
type call struct {
	method, path string
	token        string // bearer token; empty: none
	contentType  string
	body         string
	key          string // Idempotency-Key; empty: none
}

func (c call) send(r *replica) answer {
	req, err := http.NewRequest(c.method, "http://"+r.public+c.path, strings.NewReader(c.body))
	if err != nil {
		return answer{body: []byte(err.Error())}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return answer{body: []byte(err.Error())}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: b, replayed: res.Header.Get("Idempotent-Replayed") == "true"}
}

// tenant is the workspace's API client, and the access token the load
// uses: the one a token request got last, whichever release issued it,
// so tokens of each release are used on the other.
type tenant struct {
	clientID, secret string
	token            atomic.Pointer[string]
}

func (t *tenant) bearer() string { return *t.token.Load() }

// tokenCall is the client credentials grant.
func (t *tenant) tokenCall() call {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {t.clientID}, "client_secret": {t.secret}}
	return call{method: http.MethodPost, path: "/api/oauth/token", contentType: "application/x-www-form-urlencoded", body: form.Encode()}
}

// accessToken reads a token answer.
func accessToken(body []byte) (string, error) {
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("read token answer %.200q: no access_token", body)
	}
	return tok.AccessToken, nil
}

// jsonCall is a request with a JSON body and the load's token.
func (t *tenant) jsonCall(method, path string, body any, key string) call {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err) // the load's own values
	}
	return call{method: method, path: path, token: t.bearer(), contentType: "application/json", body: string(b), key: key}
}

// get is a GET with the load's token.
func (t *tenant) get(path string) call {
	return call{method: http.MethodGet, path: path, token: t.bearer()}
}

// pagination is the part of every list answer a walk follows.
type pagination struct {
	NextCursor string `json:"nextCursor"`
	SyncCursor string `json:"syncCursor"`
}

// short is a body cut for a failure line.
func short(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
