package outbound

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestCheckAddrRefuses(t *testing.T) {
	for _, tt := range []struct{ addr, reason string }{
		// IPv4
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.254", "private"},
		{"192.168.1.1", "private"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"169.254.169.254", "cloud metadata"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.254", "CGNAT"},
		{"192.0.0.1", "IETF protocol"},
		{"192.0.0.170", "IETF protocol"}, // NAT64 discovery
		{"192.0.2.1", "TEST-NET-1"},
		{"192.88.99.1", "6to4 relay"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.254", "benchmarking"},
		{"198.51.100.1", "TEST-NET-2"},
		{"203.0.113.1", "TEST-NET-3"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},
		// IPv6
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"fc00::1", "unique local"},
		{"fd12:3456:789a::1", "unique local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf::1", "link-local"},
		{"ff02::1", "multicast"},
		{"ff05::2", "multicast"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"2001::1", "Teredo"},
		{"2002:7f00:1::1", "6to4"},
		{"2002:808:808::1", "6to4"},
		{"fec0::1", "not global unicast"},          // site-local, deprecated
		{"100::1", "not global unicast"},           // discard-only
		{"5f00::1", "not global unicast"},          // SRv6
		{"64:ff9b:1::a00:1", "not global unicast"}, // local-use NAT64
		{"::7f00:1", "not global unicast"},         // IPv4-compatible ::127.0.0.1
		{"::a00:1", "not global unicast"},          // IPv4-compatible ::10.0.0.1
		// IPv4 inside IPv6
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:169.254.169.254", "cloud metadata"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"64:ff9b::127.0.0.1", "NAT64 of 127.0.0.1, loopback"},
		{"64:ff9b::10.0.0.1", "NAT64 of 10.0.0.1, private"},
		{"64:ff9b::169.254.169.254", "NAT64 of 169.254.169.254"},
	} {
		err := CheckAddr(netip.MustParseAddr(tt.addr), nil)
		var ae *AddressError
		if !errors.As(err, &ae) || !errors.Is(err, ErrAddressNotAllowed) {
			t.Errorf("CheckAddr(%s) = %v, want an *AddressError", tt.addr, err)
			continue
		}
		if !strings.Contains(ae.Reason, tt.reason) {
			t.Errorf("CheckAddr(%s) reason %q, want it to mention %q", tt.addr, ae.Reason, tt.reason)
		}
	}
}

func TestCheckAddrAllowsPublic(t *testing.T) {
	for _, a := range []string{
		"8.8.8.8", "1.1.1.1", "93.184.215.14", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "192.0.1.1", "198.17.255.255", "198.20.0.0",
		"223.255.255.255", "11.0.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "2001:200::1",
		"::ffff:8.8.8.8",   // mapped public
		"64:ff9b::8.8.8.8", // NAT64 of a public address
	} {
		if err := CheckAddr(netip.MustParseAddr(a), nil); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want nil", a, err)
		}
	}
}

func TestCheckAddrAllowedNetworks(t *testing.T) {
	allowed, err := ParseNetworks("127.0.0.0/8, 10.20.0.0/16, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1", "::ffff:127.0.0.1", "10.20.3.4", "fd00::5", "64:ff9b::10.20.0.1"} {
		if err := CheckAddr(netip.MustParseAddr(a), allowed); err != nil {
			t.Errorf("CheckAddr(%s, %s) = %v, want nil", a, allowed, err)
		}
	}
	for _, a := range []string{"10.21.0.1", "::1", "169.254.169.254", "fc00::1"} {
		if err := CheckAddr(netip.MustParseAddr(a), allowed); !errors.Is(err, ErrAddressNotAllowed) {
			t.Errorf("CheckAddr(%s, %s) = %v, want refused", a, allowed, err)
		}
	}
}

func TestCheckDialPlainHTTPOnlyToAllowed(t *testing.T) {
	allowed := Networks{netip.MustParsePrefix("10.0.0.0/8")}
	if err := checkDial("tcp4", "10.1.2.3:80", true, allowed); err != nil {
		t.Errorf("http to an allowed network: %v, want nil", err)
	}
	if err := checkDial("tcp4", "8.8.8.8:80", true, allowed); !errors.Is(err, ErrAddressNotAllowed) {
		t.Errorf("http to a public address: %v, want refused", err)
	}
	if err := checkDial("tcp4", "8.8.8.8:443", false, allowed); err != nil {
		t.Errorf("https to a public address: %v, want nil", err)
	}
	if err := checkDial("tcp6", "[fe80::1%eth0]:443", false, allowed); !errors.Is(err, ErrAddressNotAllowed) {
		t.Errorf("https to link-local: %v, want refused", err)
	}
	if err := checkDial("udp4", "8.8.8.8:53", false, allowed); !errors.Is(err, ErrAddressNotAllowed) {
		t.Errorf("udp: %v, want refused", err)
	}
}

func TestParseNetworks(t *testing.T) {
	n, err := ParseNetworks(" 10.1.2.3/8 ,, fd00::/8, 192.168.5.5 ,::1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.String(), "10.0.0.0/8,fd00::/8,192.168.5.5/32,::1/128"; got != want {
		t.Fatalf("ParseNetworks = %s, want %s", got, want)
	}
	if n, err := ParseNetworks(""); err != nil || len(n) != 0 {
		t.Fatalf(`ParseNetworks("") = %v, %v; want none`, n, err)
	}
	for _, bad := range []string{"10.0.0/8", "10.0.0.0/33", "localhost", "fe80::1%eth0", "10.0.0.0/8;"} {
		_, err := ParseNetworks("127.0.0.0/8," + bad)
		if err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("ParseNetworks(…%s) = %v, want an error naming %q", bad, err, bad)
		}
	}
}
