package remote

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in, name, kind, host, canonical string
		node                            string
	}{
		{"local", "local", "local", "", "local", ""},
		{"docker", "docker", "docker", "", "docker", ""},
		{"base=local", "base", "local", "", "base=local", ""},
		{"kubernetes:gvisor", "kubernetes", "kubernetes", "", "kubernetes:gvisor", ""},
		{"kubernetes:kata.fc-2", "kubernetes", "kubernetes", "", "kubernetes:kata.fc-2", ""},
		{"docker@ssh://root@gpu1", "docker-gpu1", "docker", "ssh://root@gpu1:22", "docker@ssh://root@gpu1:22", ""},
		{"docker@ssh://bench@GPU1.Example.com:22", "docker-gpu1-example-com", "docker", "ssh://bench@gpu1.example.com:22", "docker@ssh://bench@gpu1.example.com:22", ""},
		{"local@ssh://root@10.0.0.7:2222", "local-10-0-0-7-2222", "local", "ssh://root@10.0.0.7:2222", "local@ssh://root@10.0.0.7:2222", ""},
		{"local@ssh://root@[fd00::7]:22", "local-fd00-7", "local", "ssh://root@[fd00::7]:22", "local@ssh://root@[fd00::7]:22", ""},
		{"h2=docker@ssh://root@127.0.0.3:40022", "h2", "docker", "ssh://root@127.0.0.3:40022", "h2=docker@ssh://root@127.0.0.3:40022", ""},
		{"docker@ssh://ci_runner.2@build-box", "docker-build-box", "docker", "ssh://ci_runner.2@build-box:22", "docker@ssh://ci_runner.2@build-box:22", ""},
		{"kubernetes@worker-1", "kubernetes-worker-1", "kubernetes", "", "kubernetes@worker-1", "worker-1"},
		{"kubernetes:gvisor@ip-10-0-0-7.ec2.internal", "kubernetes-ip-10-0-0-7-ec2-internal", "kubernetes", "", "kubernetes:gvisor@ip-10-0-0-7.ec2.internal", "ip-10-0-0-7.ec2.internal"},
		{"kgv=kubernetes:gvisor@worker-1", "kgv", "kubernetes", "", "kgv=kubernetes:gvisor@worker-1", "worker-1"},
		{"docker@desktop-linux", "docker-desktop-linux", "docker", "", "docker@desktop-linux", "desktop-linux"},
		{"docker@GPU_1", "docker-gpu-1", "docker", "", "docker@GPU_1", "GPU_1"},
	} {
		s, err := ParseSpec(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		host := ""
		if s.Host != nil {
			host = s.Host.String()
		}
		if s.Name != tc.name || s.Kind != tc.kind || host != tc.host || s.String() != tc.canonical || s.Node != tc.node {
			t.Errorf("%s: name %q kind %q host %q canonical %q node %q; want %q %q %q %q %q", tc.in, s.Name, s.Kind, host, s.String(), s.Node, tc.name, tc.kind, tc.host, tc.canonical, tc.node)
		}
		// The canonical form reads back as the same spec.
		again, err := ParseSpec(s.String())
		if err != nil || again.String() != s.String() || again.Name != s.Name {
			t.Errorf("%s: its canonical form %s reads back as %+v, %v", tc.in, s.String(), again, err)
		}
	}
}

func TestParseSpecRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"Docker", `"Docker" is not a target kind`},
		{"kubernetes:", `"" after kubernetes: is not a parameter`},
		{"kubernetes:Run_C", `"Run_C" after kubernetes: is not a parameter`},
		{"kubernetes:-x", `"-x" after kubernetes: is not a parameter`},
		{"docker@", "after '@' comes a host"},
		{"docker@_gpu1", "after '@' comes a host, ssh://USER@HOST[:PORT], or a name (a Kubernetes node, a docker context)"},
		{"docker@tcp://gpu1:2375", "over ssh:// only, not tcp://"},
		{"docker@ssh://@gpu1", "no user before the '@'"},
		{"docker@ssh://root:hunter2@gpu1", "never sends a password"},
		{"docker@ssh://root@gpu1/var/run/docker.sock", "a path, query or fragment"},
		{"docker@ssh://root@gpu1?x=1", "a path, query or fragment"},
		{"docker@ssh://root@gpu1#frag", "a path, query or fragment"},
		{"docker@ssh://root@gpu1:0", `the port "0"`},
		{"docker@ssh://root@gpu1:65536", `the port "65536"`},
		{"docker@ssh://root@gpu1:022", `the port "022"`},
		{"docker@ssh://root@gpu1:ssh", "port"},
		{"docker@ssh://root@gpu1:", "no port after it"},
		{"docker@ssh://root@", "no host"},
		{"docker@ssh://-oProxyCommand=x@gpu1", "is not a login name"},
		{"docker@ssh://root@gpu_1", "is not a host name"},
		{"docker@ssh://root@-gpu1", "is not a host name"},
		{"docker@ssh://root@0.0.0.0", "is not the address of one host"},
		{"docker@ssh://root@[gpu1]:22", "invalid host"},
		{"docker@ssh://root@gpu1 ", "a space"},
		{"local,docker", "a comma"},
		{"Bad=docker@ssh://root@gpu1", `the name "Bad" is not a target name`},
		{"1st=docker", `the name "1st" is not a target name`},
	} {
		_, err := ParseSpec(tc.in)
		if err == nil {
			t.Errorf("%q: accepted", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want it to say %q", tc.in, err, tc.want)
		}
		if !strings.Contains(err.Error(), "the form is") {
			t.Errorf("%q: %v; want it to give the form", tc.in, err)
		}
	}
}

func TestParseSpecsRefusesOneNameTwice(t *testing.T) {
	specs, err := ParseSpecs([]string{"local", "docker", "docker@ssh://root@127.0.0.2", "docker@ssh://root@127.0.0.3"})
	if err != nil || len(specs) != 4 {
		t.Fatalf("%v, %v", specs, err)
	}
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"local", "local"}, `target "local" named twice`},
		{[]string{"docker@ssh://root@gpu1", "docker@ssh://bench@gpu1"}, "are both named docker-gpu1: name one"},
		{[]string{"docker-gpu1=local", "docker@ssh://root@gpu1"}, "are both named docker-gpu1"},
		{[]string{"bad@", "docker@ssh://x"}, "after '@'"},
	} {
		_, err := ParseSpecs(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want it to say %q", tc.in, err, tc.want)
		}
	}
	// Every bad spec is reported, not the first only.
	_, err = ParseSpecs([]string{"bad@", "docker@ssh://@x"})
	if err == nil || !strings.Contains(err.Error(), "bad@") || !strings.Contains(err.Error(), "docker@ssh://@x") {
		t.Errorf("want both bad specs named: %v", err)
	}
}

func TestHostSSHConfig(t *testing.T) {
	s, err := ParseSpec("local@ssh://root@[fd00::7]:2222")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Host.SSH()
	if c.User != "root" || c.Host != "fd00::7" || c.Port != 2222 || c.String() != "ssh://root@[fd00::7]:2222" {
		t.Errorf("%+v, %s", c, c.String())
	}
}
