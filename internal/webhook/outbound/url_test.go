package outbound

import (
	"errors"
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
