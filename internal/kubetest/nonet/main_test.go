package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// call runs the plugin as a runtime would: env and a configuration of
// cniVersion version on stdin. It returns what it wrote and its error.
func call(env map[string]string, version string) (string, *cniError) {
	var out bytes.Buffer
	conf := `{"cniVersion": "` + version + `", "name": "test", "type": "nonet"}`
	err := run(func(k string) string { return env[k] }, strings.NewReader(conf), &out)
	return out.String(), err
}

// TestAdd: ADD names eth0 in the pod's namespace with PodIP, in the
// caller's spec version, and nothing else: no route, no DNS.
func TestAdd(t *testing.T) {
	env := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/run/netns/x", "CNI_IFNAME": "eth0"}
	for _, v := range []string{"1.0.0", "0.4.0", "0.3.1"} {
		out, err := call(env, v)
		if err != nil {
			t.Fatalf("ADD (%s): %+v", v, err)
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("ADD (%s) wrote %q: %v", v, out, err)
		}
		want := `{"cniVersion":"` + v + `","interfaces":[{"name":"eth0","sandbox":"/run/netns/x"}],"ips":[{"address":"169.254.77.77/32","interface":0}]}`
		if v == "0.3.1" {
			want = strings.Replace(want, `"interface":0}`, `"interface":0,"version":"4"}`, 1)
		}
		if got := strings.TrimSpace(out); got != want {
			t.Errorf("ADD (%s) = %s\nwant %s", v, got, want)
		}
	}
	delete(env, "CNI_NETNS")
	if _, err := call(env, "1.0.0"); err == nil || err.Code != errInvalidEnv {
		t.Errorf("ADD without CNI_NETNS: %+v, want code %d", err, errInvalidEnv)
	}
}

// TestOtherCommands: DEL and CHECK succeed silently, VERSION lists the
// versions, an unknown version or command is an error with its code.
func TestOtherCommands(t *testing.T) {
	for _, cmd := range []string{"DEL", "CHECK"} {
		if out, err := call(map[string]string{"CNI_COMMAND": cmd}, "1.0.0"); err != nil || out != "" {
			t.Errorf("%s: %q, %+v; want nothing", cmd, out, err)
		}
	}
	out, err := call(map[string]string{"CNI_COMMAND": "VERSION"}, "")
	if err != nil || !strings.Contains(out, `"supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]`) {
		t.Errorf("VERSION: %q, %+v", out, err)
	}
	if _, err := call(map[string]string{"CNI_COMMAND": "ADD"}, "0.2.0"); err == nil || err.Code != errIncompatibleVersion {
		t.Errorf("ADD with cniVersion 0.2.0: %+v, want code %d", err, errIncompatibleVersion)
	}
	if _, err := call(map[string]string{"CNI_COMMAND": "FROB"}, "1.0.0"); err == nil || err.Code != errInvalidEnv {
		t.Errorf("FROB: %+v, want code %d", err, errInvalidEnv)
	}
}
