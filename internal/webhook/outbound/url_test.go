package outbound

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestValidateURL(t *testing.T) {
	loopback, _ := ParseNetworks("127.0.0.0/8,::1/128")
	cluster, _ := ParseNetworks("10.0.0.0/8")
	long := "https://example.com/" + strings.Repeat("a", MaxURLLength-len("https://example.com/"))
	tests := []struct {
		url     string
		allowed Networks
		want    error // nil: accepted
	}{
		{"https://example.com/webhooks", nil, nil},
		{"HTTPS://Example.COM:8443/hooks?x=1", nil, nil},
		{"https://8.8.8.8/hook", nil, nil},
		{"https://[2606:4700:4700::1111]/hook", nil, nil},
		{"https://xn--bcher-kva.example/hook", nil, nil},
		{"https://receiver.internal/hook", nil, nil}, // names resolve only at dial time
		{long, nil, nil},
		{long + "a", nil, ErrURLTooLong},
		{"", nil, ErrURLMalformed},
		{"example.com/hook", nil, ErrURLMalformed},
		{"/hook", nil, ErrURLMalformed},
		{"https:example.com", nil, ErrURLMalformed},
		{"https://exa mple.com/", nil, ErrURLMalformed},
		{"ftp://example.com/", nil, ErrURLScheme},
		{"javascript:alert(1)", nil, ErrURLMalformed},
		{"http://example.com/hook", nil, ErrURLScheme},
		{"http://8.8.8.8/hook", cluster, ErrURLScheme},
		{"http://127.0.0.1:8080/hook", nil, ErrURLScheme},
		{"https://user:pass@example.com/", nil, ErrURLUserInfo},
		{"https://user@example.com/", nil, ErrURLUserInfo},
		{"https:///hook", nil, ErrURLHost},
		{"https://example.com:0/", nil, ErrURLHost},
		{"https://example.com:65536/", nil, ErrURLHost},
		{"https://127.1/", nil, ErrURLHost},
		{"https://0x7f.1/", nil, ErrURLHost},
		{"https://2130706433/", nil, ErrURLHost},
		{"https://127.0.0.1/", nil, ErrAddressNotAllowed},
		{"https://127.0.0.1:8443/", nil, ErrAddressNotAllowed},
		{"https://10.0.0.1/", nil, ErrAddressNotAllowed},
		{"https://169.254.169.254/latest/meta-data/", nil, ErrAddressNotAllowed},
		{"https://100.64.0.1/", nil, ErrAddressNotAllowed},
		{"https://0.0.0.0/", nil, ErrAddressNotAllowed},
		{"https://[::1]/", nil, ErrAddressNotAllowed},
		{"https://[::ffff:127.0.0.1]/", nil, ErrAddressNotAllowed},
		{"https://[::ffff:7f00:1]/", nil, ErrAddressNotAllowed},
		{"https://[fe80::1%25eth0]/", nil, ErrAddressNotAllowed},
		{"https://[64:ff9b::a9fe:a9fe]/", nil, ErrAddressNotAllowed},
		{"https://localhost/", nil, ErrAddressNotAllowed},
		{"https://LOCALHOST./", nil, ErrAddressNotAllowed},
		{"https://api.localhost:8443/", nil, ErrAddressNotAllowed},
		// Allowed networks open loopback (and http) to what they hold.
		{"https://127.0.0.1:8443/", loopback, nil},
		{"http://127.0.0.1:8080/hook", loopback, nil},
		{"http://[::1]:8080/hook", loopback, nil},
		{"https://localhost:8443/", loopback, nil},
		{"http://10.2.3.4/hook", cluster, nil},
		{"http://receiver.cluster.local/hook", cluster, nil}, // the dialer allows only 10/8 for it
		{"https://127.0.0.1/", cluster, ErrAddressNotAllowed},
		{"https://localhost/", cluster, ErrAddressNotAllowed},
	}
	for _, tt := range tests {
		err := ValidateURL(tt.url, tt.allowed)
		name := tt.url
		if len(name) > 60 {
			name = name[:60] + "…"
		}
		if tt.want == nil {
			if err != nil {
				t.Errorf("ValidateURL(%q, %s) = %v, want nil", name, tt.allowed, err)
			}
			continue
		}
		if !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidURL) {
			t.Errorf("ValidateURL(%q, %s) = %v, want %v (and ErrInvalidURL)", name, tt.allowed, err, tt.want)
		}
	}
}

func TestValidateURLMessages(t *testing.T) {
	for url, want := range map[string]string{
		"http://example.com/":             "url must use https",
		"https://a:b@example.com/":        "url must not contain user info",
		"https://10.1.2.3/":               "url host address 10.1.2.3 is not allowed: private (RFC 1918)",
		"https://169.254.169.254/":        "url host address 169.254.169.254 is not allowed: link-local, cloud metadata",
		"https://localhost/":              "url host localhost is not allowed: loopback",
		"https://example.com:99999/hooks": "url port 99999 is not in 1..65535",
	} {
		err := ValidateURL(url, nil)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ValidateURL(%q) = %v, want a message starting %q", url, err, want)
		}
	}
}

// TestValidateURLJudgesTheHostItDials (issue 34, items 5 and 6): a host is
// judged as the HTTP client will look it up, after IDNA (UTS #46)
// mapping. An IP literal or localhost written in full-width, circled or
// mathematical digits or with ideographic dots is refused like its ASCII
// form; a host with invisible or bidirectional characters, an invalid
// label or letters of two scripts in one label is not a valid host.
func TestValidateURLJudgesTheHostItDials(t *testing.T) {
	loopback, _ := ParseNetworks("127.0.0.0/8")
	tests := []struct {
		url     string
		allowed Networks
		want    error // nil: accepted
	}{
		// IP literals once mapped (item 6).
		{"https://１２７.０.０.１/", nil, ErrAddressNotAllowed},
		{"https://127。0。0。1/", nil, ErrAddressNotAllowed},
		{"https://127．0．0．1/", nil, ErrAddressNotAllowed}, // full-width full stop
		{"https://127｡0｡0｡1/", nil, ErrAddressNotAllowed}, // halfwidth ideographic full stop
		{"https://１27.0.0.1/", nil, ErrAddressNotAllowed}, // mixed digits
		{"https://１２７。０.0．1:8443/hook", nil, ErrAddressNotAllowed},
		{"https://①②⑦.⓪.⓪.①/", nil, ErrAddressNotAllowed}, // circled digits map to digits
		{"https://𝟏𝟎.0.0.1/", nil, ErrAddressNotAllowed},  // mathematical bold digits
		{"https://１６９.２５４.１６９.２５４/latest/meta-data/", nil, ErrAddressNotAllowed},
		{"https://%EF%BC%91%EF%BC%92%EF%BC%97.0.0.1/", nil, ErrAddressNotAllowed}, // percent-encoded full-width
		{"https://ｌｏｃａｌｈｏｓｔ/", nil, ErrAddressNotAllowed},
		{"https://ａｐｉ.ＬＯＣＡＬＨＯＳＴ./", nil, ErrAddressNotAllowed},
		{"https://１２７.１/", nil, ErrURLHost},       // numeric last label, as 127.1
		{"https://⑴.0.0.1/", nil, ErrURLHost},     // parenthesized digit: disallowed by UTS #46
		{"https://١٢٧.٠.٠.١/", nil, ErrURLHost},   // Arabic-Indic digits: not a valid label
		{"http://１２７.０.０.１:8080/", loopback, nil}, // allowed networks apply to the mapped address
		{"https://８.８.８.８/hook", nil, nil},
		// Hosts that read as something else (item 5).
		{"https://exa\u200Bmple.com/", nil, ErrURLHost},
		{"https://exa%E2%80%8Bmple.com/", nil, ErrURLHost},
		{"https://[fe80::1%25\u202E]/", Networks{netip.MustParsePrefix("fe80::/10")}, ErrURLHost}, // in a zone
		{"https://exa\u200Dmple.com/", nil, ErrURLHost},
		{"https://exa\u00ADmple.com/", nil, ErrURLHost},
		{"https://example.com\uFEFF/", nil, ErrURLHost},
		{"https://moc.elpmaxe\u202E/", nil, ErrURLHost},
		{"https://a\u2067b.example/", nil, ErrURLHost},
		{"https://\u0435\u0445ample.com/", nil, ErrURLHost}, // Cyrillic е and х, Latin "ample"
		{"https://ex\u0430mple.com/", nil, ErrURLHost},
		{"https://xn--exmple-4nf.com/", nil, ErrURLHost}, // the same, written as its A-label
		{"https://xn--zz.example/", nil, ErrURLHost},
		{"https://" + strings.Repeat("ü", 64) + ".example/", nil, ErrURLHost},
		{"https://bü..example/", nil, ErrURLHost},
		{"https://bücher.example/hook", nil, nil},
		{"https://BÜCHER.example:8443/hook", nil, nil},
		{"https://пример.example/hook", nil, nil}, // one script per label
		{"https://日本語ドメイン.example/", nil, nil},    // Han with Katakana
	}
	for _, tt := range tests {
		err := ValidateURL(tt.url, tt.allowed)
		if tt.want == nil {
			if err != nil {
				t.Errorf("ValidateURL(%+q, %s) = %v, want nil", tt.url, tt.allowed, err)
			}
			continue
		}
		if !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidURL) {
			t.Errorf("ValidateURL(%+q, %s) = %v, want %v (and ErrInvalidURL)", tt.url, tt.allowed, err, tt.want)
		}
	}
}

// TestNormalizeURLKeepsHostsAsALabels: a host that is not plain ASCII is
// replaced by its A-labels (lower-case), an IP literal in other digits by
// its ASCII form; the rest of the URL is kept byte for byte, and an ASCII
// host without an A-label is kept as written.
func TestNormalizeURLKeepsHostsAsALabels(t *testing.T) {
	loopback, _ := ParseNetworks("127.0.0.0/8")
	for _, tt := range []struct {
		in      string
		allowed Networks
		want    string
	}{
		{"https://bücher.example/hook", nil, "https://xn--bcher-kva.example/hook"},
		{"https://BÜCHER.Example:8443/hooks?q=ü&x=%20#top", nil, "https://xn--bcher-kva.example:8443/hooks?q=ü&x=%20#top"},
		{"https://bücher.example", nil, "https://xn--bcher-kva.example"},
		{"https://bücher.example.:443?x", nil, "https://xn--bcher-kva.example.:443?x"},
		{"https://bücher。example#f", nil, "https://xn--bcher-kva.example#f"},
		{"https://b%C3%BCcher.example/hook", nil, "https://xn--bcher-kva.example/hook"},
		{"https://XN--BCHER-KVA.example/hook", nil, "https://xn--bcher-kva.example/hook"},
		{"https://пример.испытание/", nil, "https://xn--e1afmkfd.xn--80akhbyknj4f/"},
		{"https://straße.example/", nil, "https://xn--strae-oqa.example/"}, // nontransitional: ß stays ß
		{"https://８.８.８.８/hook", nil, "https://8.8.8.8/hook"},
		{"http://１２７.０.０.１:8080/hook", loopback, "http://127.0.0.1:8080/hook"},
		{"https://ｌｏｃａｌｈｏｓｔ:8443/", loopback, "https://localhost:8443/"},
		{"HTTPS://Example.COM:8443/hooks?x=1", nil, "HTTPS://Example.COM:8443/hooks?x=1"},
		{"https://under_score.example/hook", nil, "https://under_score.example/hook"},
		{"https://[2606:4700:4700::1111]/hook", nil, "https://[2606:4700:4700::1111]/hook"},
		{"https://example.com/a\u202Eb", nil, "https://example.com/a\u202Eb"}, // the path's characters are the caller's
	} {
		got, err := NormalizeURL(tt.in, tt.allowed)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeURL(%+q) = %+q, %v; want %+q", tt.in, got, err, tt.want)
		}
	}
}

// TestValidateURLHostMessages: a refused host is named in ASCII, so the
// message itself cannot read as something else, and says why.
func TestValidateURLHostMessages(t *testing.T) {
	for raw, want := range map[string]string{
		"https://１２７.０.０.１/":         "url host address 127.0.0.1 is not allowed: loopback",
		"https://ｌｏｃａｌｈｏｓｔ/":         "url host localhost is not allowed: loopback",
		"https://exa\u200Bmple.com/": "url host must not contain invisible, control or bidirectional characters such as U+200B",
		"https://ex\u0430mple.com/":  `url host xn--exmple-4nf.com ("ex\u0430mple.com") mixes Cyrillic and Latin letters in one label`,
		"https://⑴.0.0.1/":           `url host "\u2474.0.0.1" is not a valid host name (idna: disallowed rune U+2474)`,
		"https://aا.example/":        `url host "a\u0627.example" is not a valid host name (idna: invalid label "a\u0627.example")`,
		"https://xn--zz.example/":    `url host "xn--zz.example" is not a valid host name (idna: invalid label "zz")`,
		"https://bü..example/":       "url host xn--b-eha..example has an empty label",
		"https://１２７.１/":             `url host "127.1" is not a valid host name (write an IP address`,
	} {
		err := ValidateURL(raw, nil)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ValidateURL(%+q) = %v, want a message starting %q", raw, err, want)
		}
	}
}

// TestDisplayURL: a URL stored before hosts were mapped is shown with its
// host as A-labels and with what does not show percent-encoded; a URL
// stored since is shown as stored.
func TestDisplayURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://receiver.example/hooks?x=1":         "https://receiver.example/hooks?x=1",
		"https://xn--bcher-kva.example/hook":         "https://xn--bcher-kva.example/hook",
		"https://bücher.example/hook?q=ü":            "https://xn--bcher-kva.example/hook?q=ü",
		"https://ex\u0430mple.com/":                  "https://xn--exmple-4nf.com/",
		"https://\u0435\u0445ample.com/":             "https://xn--ample-ywe6i.com/",
		"https://１２７.０.０.１/":                         "https://127.0.0.1/",
		"https://example.com/a\u202Eb":               "https://example.com/a%E2%80%AEb",
		"https://example.com/x?\u2066y\u2069#\u200F": "https://example.com/x?%E2%81%A6y%E2%81%A9#%E2%80%8F",
		"https://exa\u200Bmple.com/":                 "https://exa%E2%80%8Bmple.com/",
		"https://a\u202Eb.example/":                  "https://a%E2%80%AEb.example/",
		"not a url \u0085":                           "not a url %C2%85",
	} {
		if got := DisplayURL(in); got != want {
			t.Errorf("DisplayURL(%+q) = %+q, want %+q", in, got, want)
		}
	}
}
