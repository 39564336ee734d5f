package engine

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/docker/docker/pkg/stdcopy"
)

// TestDemuxLikeStdCopy feeds demux and the official client's
// stdcopy.StdCopy the same streams, written by stdcopy's own writers and
// read a byte at a time, and wants the same output and the same refusals,
// but for a stream cut short: stdcopy ends it quietly, demux says so (the
// connection broke; the output is not whole).
func TestDemuxLikeStdCopy(t *testing.T) {
	var stream bytes.Buffer
	out, errw := stdcopy.NewStdWriter(&stream, stdcopy.Stdout), stdcopy.NewStdWriter(&stream, stdcopy.Stderr)
	big := strings.Repeat("x", 100<<10) // a frame larger than the reader's buffer
	out.Write([]byte("one\n"))
	errw.Write([]byte("two\n"))
	out.Write([]byte(big))
	out.Write(nil)
	errw.Write([]byte("three\n"))
	good := stream.Bytes()

	sysErr := append(append([]byte{}, good[:8+4]...), 3, 0, 0, 0, 0, 0, 0, 4)
	sysErr = append(sysErr, "boom"...)
	for _, c := range []struct {
		name    string
		in      []byte
		wantErr string // "" for none
	}{
		{"frames", good, ""},
		{"empty", nil, ""},
		{"cut in a header", good[:4], "unexpected EOF"},
		{"cut in a frame", good[:8+2], "unexpected EOF"},
		{"the Engine's error", sysErr, "boom"},
		{"an unknown stream", []byte{9, 0, 0, 0, 0, 0, 0, 1, 'x'}, "unrecognized stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var o1, e1, o2, e2 bytes.Buffer
			_, err1 := stdcopy.StdCopy(&o1, &e1, bytes.NewReader(c.in))
			err2 := demux(&o2, &e2, bufio.NewReaderSize(iotest.OneByteReader(bytes.NewReader(c.in)), 32<<10))
			cut := strings.HasPrefix(c.name, "cut")
			if !cut && (o1.String() != o2.String() || e1.String() != e2.String()) {
				t.Errorf("stdout %d bytes, stderr %q from demux; stdcopy: %d bytes, %q", o2.Len(), e2.String(), o1.Len(), e1.String())
			}
			if c.wantErr == "" && err2 != nil {
				t.Errorf("demux: %v", err2)
			}
			if c.wantErr != "" && (err2 == nil || !strings.Contains(err2.Error(), c.wantErr)) {
				t.Errorf("demux: %v, want an error saying %q", err2, c.wantErr)
			}
			if !cut && (err1 == nil) != (err2 == nil) {
				t.Errorf("stdcopy says %v, demux %v", err1, err2)
			}
		})
	}
}
