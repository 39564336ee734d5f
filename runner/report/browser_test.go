package report

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/internal/testenv"
)

// screenshot is where the fixture's screenshot is kept for the README;
// go test ./runner/report -run TestHTMLInBrowser -update rewrites it.
const screenshot = "docs/report.png"

// checkPage holds the report twice, in frames 1300 and 400 px wide (a
// headless window is never narrower than 500 px; a frame is), and a
// script that measures each from inside the browser once all is loaded:
// the document's scroll width against the frame's, and each chart's drawn
// size and marks. It leaves the result in the DOM, where --dump-dom
// prints it. The report itself has no script.
const checkPage = `<!DOCTYPE html>
<html><body style="margin:0">
<iframe id="w1300" style="width:1300px;height:900px;border:0;display:block" srcdoc="REPORT"></iframe>
<iframe id="w400" style="width:400px;height:900px;border:0;display:block" srcdoc="REPORT"></iframe>
<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("iframe").forEach(function (f) {
    var doc = f.contentDocument, charts = [];
    doc.querySelectorAll("figure svg").forEach(function (s) {
      var box = s.getBoundingClientRect(), drawn = s.getBBox();
      charts.push({label: s.getAttribute("aria-label"), marks: s.querySelectorAll("rect.bar").length,
        width: Math.round(box.width), height: Math.round(box.height), drawnWidth: Math.round(drawn.width)});
    });
    out.push({innerWidth: f.contentWindow.innerWidth, scrollWidth: doc.documentElement.scrollWidth, charts: charts});
  });
  var pre = document.createElement("pre");
  pre.id = "sealbench-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
</body></html>
`

type browserCheck struct {
	InnerWidth  int `json:"innerWidth"`
	ScrollWidth int `json:"scrollWidth"`
	Charts      []struct {
		Label                string
		Marks, Width, Height int
		DrawnWidth           int `json:"drawnWidth"`
	}
}

// TestHTMLInBrowser renders the fixed run's HTML report in headless
// Chromium, as a person would open it: at 1300 px and at a phone's 400 px
// the page has no horizontal scroll, and every chart is drawn with marks
// in it. It takes a screenshot at 1300 px, the one the README shows.
func TestHTMLInBrowser(t *testing.T) {
	chromium := testenv.NeedCommand(t, "chromium")
	testenv.Short(t, "starts a browser")
	r, _ := fixtureReport(t)
	var page bytes.Buffer
	if err := Write(&page, r, "html"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	reportPath, checkPath := filepath.Join(dir, "report.html"), filepath.Join(dir, "check.html")
	os.WriteFile(reportPath, page.Bytes(), 0o644)
	os.WriteFile(checkPath, []byte(strings.ReplaceAll(checkPage, "REPORT", html.EscapeString(page.String()))), 0o644)

	out := runChromium(t, chromium, 1400, 1000, "--dump-dom", "file://"+checkPath)
	_, rest, ok := strings.Cut(out, `<pre id="sealbench-check">`)
	raw, _, ok2 := strings.Cut(rest, "</pre>")
	if !ok || !ok2 {
		t.Fatalf("the page's check left no result in the DOM:\n%.2000s", out)
	}
	var checks []browserCheck
	if err := json.Unmarshal([]byte(html.UnescapeString(raw)), &checks); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if len(checks) != 2 {
		t.Fatalf("%d frames measured, want 2: %s", len(checks), raw)
	}
	for i, width := range []int{1300, 400} {
		c := checks[i]
		if c.InnerWidth != width {
			t.Errorf("the frame is %d px wide, want %d", c.InnerWidth, width)
		}
		if c.ScrollWidth > c.InnerWidth {
			t.Errorf("%d px: the page scrolls sideways: %d px wide", width, c.ScrollWidth)
		}
		// Five timings by value (the A/A among them), the ratio to the
		// baseline, the FUSE requests by opcode.
		if len(c.Charts) != 7 {
			t.Errorf("%d px: %d charts, want 7", width, len(c.Charts))
		}
		for _, ch := range c.Charts {
			if ch.Marks == 0 || ch.Width == 0 || ch.Height == 0 || ch.DrawnWidth == 0 || ch.Width > width {
				t.Errorf("%d px: chart %q is empty or too wide: %+v", width, ch.Label, ch)
			}
		}
	}

	png := filepath.Join(dir, "report.png")
	runChromium(t, chromium, 1300, 2300, "--hide-scrollbars", "--screenshot="+png, "file://"+reportPath)
	b, err := os.ReadFile(png)
	if err != nil || len(b) < 24 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("no PNG screenshot: %v", err)
	}
	if w, h := binary.BigEndian.Uint32(b[16:20]), binary.BigEndian.Uint32(b[20:24]); w != 1300 || h != 2300 {
		t.Errorf("the screenshot is %dx%d, want 1300x2300", w, h)
	}
	if testenv.Update() {
		if err := os.WriteFile(filepath.Join(testenv.ModuleRoot(t), screenshot), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runChromium runs headless Chromium on a fresh profile, with nothing
// that reaches the network, in a window of width x height, and returns
// its standard output.
func runChromium(t *testing.T, chromium string, width, height int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=" + strconv.Itoa(width) + "," + strconv.Itoa(height)}
	cmd := exec.CommandContext(ctx, chromium, append(flags, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
