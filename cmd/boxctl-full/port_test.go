package main

import "testing"

func TestParsePublish(t *testing.T) {
	for _, tc := range []struct {
		in       string
		ip       string
		host, pt uint32
		bad      bool
	}{
		{in: "8080:80", host: 8080, pt: 80},
		{in: "0:80", host: 0, pt: 80},
		{in: "127.0.0.1:8080:80", ip: "127.0.0.1", host: 8080, pt: 80},
		{in: "[::1]:8080:80", ip: "::1", host: 8080, pt: 80},
		{in: "127.0.0.1:0:70000", ip: "127.0.0.1", host: 0, pt: 70000}, // boxd names the field
		{in: "80", bad: true},
		{in: ":80", bad: true},
		{in: "a:b", bad: true},
		{in: ":1:80", bad: true},
		{in: "8080:-1", bad: true},
	} {
		p, err := parsePublish(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted as %v", tc.in, p)
			}
			continue
		}
		if err != nil || p.HostIp != tc.ip || p.HostPort != tc.host || p.Port != tc.pt {
			t.Errorf("%q: got %v, %v", tc.in, p, err)
		}
	}
}
