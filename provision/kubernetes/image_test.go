package kubernetes

import "testing"

func TestImageRef(t *testing.T) {
	for _, c := range []struct{ image, tag, want string }{
		{"127.0.0.1:5000/sealbench/sandbox", "build-linux-0123456789ab", "127.0.0.1:5000/sealbench/sandbox:build-linux-0123456789ab"},
		{"127.0.0.1:5000/sealbench/sandbox", "", "127.0.0.1:5000/sealbench/sandbox:latest"},
		{"127.0.0.1:5000/sealbench/sandbox:v1", "build-linux-0123456789ab", "127.0.0.1:5000/sealbench/sandbox:v1"},
		{"registry.example.com/sb@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "x",
			"registry.example.com/sb@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	} {
		ref, err := ImageRef(c.image, c.tag)
		if err != nil || ref.String() != c.want {
			t.Errorf("ImageRef(%q, %q) = %v, %v; want %s", c.image, c.tag, ref, err, c.want)
		}
	}
	for _, bad := range []string{"Not A Repo", "127.0.0.1:5000/sb@sha256:short", ""} {
		if ref, err := ImageRef(bad, "t"); err == nil {
			t.Errorf("ImageRef(%q) = %v, want an error", bad, ref)
		}
	}
	for ref, want := range map[string]string{"sealbench/sandbox:build-linux-0123456789ab": "build-linux-0123456789ab", "sealbench/sandbox": "", "127.0.0.1:5000/sb": ""} {
		if got := bundleTag(ref); got != want {
			t.Errorf("bundleTag(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestGVisorHandler(t *testing.T) {
	for h, want := range map[string]bool{"runsc": true, "gvisor": true, "runsc-kvm": true, "gvisor-systrap": true,
		"runc": false, "kata": false, "runscx": false, "": false} {
		if got := GVisorHandler(h); got != want {
			t.Errorf("GVisorHandler(%q) = %v, want %v", h, got, want)
		}
	}
}
