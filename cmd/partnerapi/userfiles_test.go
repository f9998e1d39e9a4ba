package main

import (
	"os"
	"strings"
	"testing"
)

// TestWhatAUserExpectsToFind: the files a user looks for first are there
// and say what they should (issue 24, item 10): an MIT LICENSE (the one
// clients/ts packs), a CHANGELOG in the Keep a Changelog shape with an
// Unreleased section, and docs/api.md's note on importing the OpenAPI
// document into Postman. TestIndexPointsAtTheContract covers GET /,
// TestGoClientModule clients/go, TestTheImagesBinaryIsStatic and
// TestTheSystemdUnitVerifies docs/operations.md.
func TestWhatAUserExpectsToFind(t *testing.T) {
	t.Parallel()
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile("../../" + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return string(b)
	}
	license := read("LICENSE")
	if !strings.HasPrefix(license, "MIT License\n") || !strings.Contains(license, "Copyright (c) ") ||
		!strings.Contains(license, "THE SOFTWARE IS PROVIDED \"AS IS\"") {
		t.Errorf("LICENSE is not the MIT license:\n%.200s", license)
	}
	changelog := read("CHANGELOG.md")
	if !strings.HasPrefix(changelog, "# Changelog\n") || !strings.Contains(changelog, "\n## Unreleased\n") || !strings.Contains(changelog, "keepachangelog.com") {
		t.Errorf("CHANGELOG.md has no Unreleased section in the Keep a Changelog shape:\n%.300s", changelog)
	}
	// Releases are numbered (issue 33): the release this binary is, and the
	// one PREVIOUS_RELEASE names, each have their section.
	prev := strings.Fields(read("PREVIOUS_RELEASE"))
	if len(prev) != 2 || !strings.Contains(changelog, "\n## "+prev[1]+" (") {
		t.Errorf("CHANGELOG.md has no section for the previous release %v", prev)
	}
	if !strings.Contains(changelog, "\nRelease "+release+" ") {
		t.Errorf("CHANGELOG.md's Unreleased section does not name the release being made, %s", release)
	}
	api := read("docs/api.md")
	i := strings.Index(api, "**Postman**")
	if i < 0 || !strings.Contains(api[i:min(len(api), i+400)], "`$BASE_URL/openapi.json`") {
		t.Errorf("docs/api.md does not say how Postman imports $BASE_URL/openapi.json")
	}
	readme := read("README.md")
	if !strings.Contains(readme, "Postman") || !strings.Contains(readme, "/openapi.json") {
		t.Errorf("README.md does not point a partner at /openapi.json for Postman")
	}
}

// TestTheGoHintIsTheExamplesCode: docs/api.md's Go block shows the h2c
// transport gRPC needs against http:// (issue 24, item 8), in the very
// lines of clients/go/example, which TestGoClientModule runs over gRPC
// against a real server. Before, the hint was a bare WithGRPC, which
// fails against `make run` with "gRPC needs HTTP/2".
func TestTheGoHintIsTheExamplesCode(t *testing.T) {
	t.Parallel()
	hint := markdownBlock(t, "../../docs/api.md", "go", "connect.WithGRPC()")
	example, err := os.ReadFile("../../clients/go/example/main.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		"h2c := &http.Transport{Protocols: new(http.Protocols)}",
		"h2c.Protocols.SetUnencryptedHTTP2(true)",
		"&http.Client{Transport: h2c}",
	}
	for _, l := range lines {
		if !strings.Contains(hint, l) || !strings.Contains(string(example), l) {
			t.Errorf("%q is not in both docs/api.md's Go hint and clients/go/example/main.go", l)
		}
	}
	for _, l := range strings.Split(hint, "\n") {
		if strings.Contains(l, "connect.WithGRPC()") && !strings.Contains(l, "h2c") {
			t.Errorf("docs/api.md: a gRPC client without the h2c transport: %s", strings.TrimSpace(l))
		}
	}
}
