// Command nonet is a CNI plugin, for the Kubernetes test cluster only
// (internal/kubetest), that gives a pod no network at all.
//
// containerd 1.6's CRI plugin runs every pod sandbox that does not use the
// host's network through CNI, and wants the result to name an address on
// eth0; without a plugin it runs no such pod, and the node stays NotReady.
// So on ADD nonet creates nothing and answers a result that names the
// interface eth0 (CNI_IFNAME) in the pod's network namespace with the
// link-local address PodIP, which exists nowhere: that is the point. No
// interface is made, no route, no peer; the namespace keeps only the
// loopback device (which the standard `loopback` plugin brings up), and the
// pod reaches nothing outside itself. The address is only what the pod's
// status shows. DEL, CHECK, STATUS and GC succeed (there is nothing to
// remove or check), VERSION answers. It keeps no state.
//
// The fixture builds it into its cluster directory at Start and names it
// in the containerd's CNI configuration.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// PodIP is the address every result names, on no interface that exists:
// a link-local /32 of IPv4's 169.254.0.0/16, which nothing routes.
const PodIP = "169.254.77.77/32"

// The spec versions nonet answers in; from 0.4.0 on results have the shape
// it writes (0.3.x's differ only by the ips' "version").
var supported = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// CNI's error codes (the spec's "Well-known Error Codes").
const (
	errIncompatibleVersion = 1
	errInvalidEnv          = 4
	errDecoding            = 6
)

type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       int    `json:"code"`
	Msg        string `json:"msg"`
}

func main() {
	if err := run(os.Getenv, os.Stdin, os.Stdout); err != nil {
		json.NewEncoder(os.Stdout).Encode(err)
		os.Exit(1)
	}
}

// run answers the command CNI_COMMAND, its network configuration read
// from stdin, on stdout.
func run(env func(string) string, stdin io.Reader, stdout io.Writer) *cniError {
	cmd := env("CNI_COMMAND")
	if cmd == "VERSION" {
		json.NewEncoder(stdout).Encode(map[string]any{"cniVersion": supported[len(supported)-1], "supportedVersions": supported})
		return nil
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return &cniError{supported[len(supported)-1], errDecoding, "reading the network configuration: " + err.Error()}
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		return &cniError{supported[len(supported)-1], errDecoding, "decoding the network configuration: " + err.Error()}
	}
	if !slices.Contains(supported, conf.CNIVersion) {
		return &cniError{supported[len(supported)-1], errIncompatibleVersion,
			fmt.Sprintf("cniVersion %q: nonet speaks %v", conf.CNIVersion, supported)}
	}
	switch cmd {
	case "ADD":
		ifname, netns := env("CNI_IFNAME"), env("CNI_NETNS")
		if ifname == "" || netns == "" || env("CNI_CONTAINERID") == "" {
			return &cniError{conf.CNIVersion, errInvalidEnv, "ADD needs CNI_CONTAINERID, CNI_NETNS and CNI_IFNAME"}
		}
		ip := map[string]any{"address": PodIP, "interface": 0}
		if strings.HasPrefix(conf.CNIVersion, "0.3.") {
			ip["version"] = "4"
		}
		json.NewEncoder(stdout).Encode(map[string]any{
			"cniVersion": conf.CNIVersion,
			"interfaces": []map[string]string{{"name": ifname, "sandbox": netns}},
			"ips":        []any{ip},
		})
		return nil
	case "DEL", "CHECK", "STATUS", "GC":
		return nil
	}
	return &cniError{conf.CNIVersion, errInvalidEnv, fmt.Sprintf("unknown CNI_COMMAND %q", cmd)}
}
