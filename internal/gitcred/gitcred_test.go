package gitcred

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseRequest(t *testing.T) {
	req, err := ParseRequest(strings.NewReader("capability[]=authtype\nprotocol=https\nhost=git.example.com:3000\npath=alice/app.git\nwwwauth[]=Basic realm=\"x\"\n\nignored=after the blank line\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Protocol: "https", Host: "git.example.com:3000", Path: "alice/app.git"}
	if req != want {
		t.Fatalf("got %+v, want %+v", req, want)
	}
	req, err = ParseRequest(strings.NewReader("url=https://bob@git.example.com/team/app.git\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Request{Protocol: "https", Host: "git.example.com", Path: "team/app.git", Username: "bob"}); req != want {
		t.Fatalf("from url=: got %+v, want %+v", req, want)
	}
	for in, wantErr := range map[string]string{
		"":                                  "no protocol",
		"protocol=https\n":                  "no host",
		"protocol=https\nhost\n":            `line "host" is not key=value`,
		"protocol=https\nhost=a\x00b\n":     "a NUL byte",
		"url=git.example.com/x\n":           "is not an absolute URL",
		strings.Repeat("path=aaaa\n", 8000): "over 65536 bytes",
		"protocol=" + strings.Repeat("a", 70000) + "\n": "over 65536 bytes",
	} {
		_, err := ParseRequest(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseRequest(%.30q): %v, want an error with %q", in, err, wantErr)
		}
	}
}

// FuzzParseRequest: whatever arrives on the socket, the parse ends with a bounded
// request or an error, and a request it accepts prints back as lines that parse to the same
// request (no value can forge another attribute).
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"protocol=https\nhost=h\npath=a/b.git\n\n", "url=https://u@h:1/p\n", "protocol=https\r\nhost=h\r\n", "=x\n", "host=h\nprotocol=ssh\nusername=git\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		req, err := ParseRequest(strings.NewReader(in))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := req.Format(&b); err != nil {
			t.Fatal(err)
		}
		again, err := ParseRequest(&b)
		if err != nil || again != req {
			t.Fatalf("%q: printed as %q, read back as %+v, %v", in, b.String(), again, err)
		}
	})
}
