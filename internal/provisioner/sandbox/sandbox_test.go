package sandbox

import (
	"strings"
	"testing"
)

func TestParseUser(t *testing.T) {
	for _, c := range []struct {
		in     string
		offset int
		want   User
		err    string
	}{
		{in: "auto", want: User{UID: DefaultUID, GID: DefaultUID}},
		{in: "", offset: 2, want: User{UID: DefaultUID + 2, GID: DefaultUID + 2}},
		{in: "5000", offset: 1, want: User{UID: 5001, GID: 5001}},
		{in: "5000:6000", want: User{UID: 5000, GID: 6000}},
		{in: "nobody", want: User{UID: 65534, GID: 65534}},
		{in: "0", err: "not root"},
		{in: "5000:0", err: "not root"},
		{in: "-3", err: "not root"},
		{in: "5000:x", err: "not a number"},
		{in: "root", err: "must not be root"},
		{in: "nobody", offset: 1, err: "one provisioner only"},
		{in: "no-such-user-here", err: "no user"},
	} {
		got, err := ParseUser(c.in, DefaultUID, c.offset)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseUser(%q, %d) = %v, %v; want an error with %q", c.in, c.offset, got, err, c.err)
			}
			continue
		}
		if err != nil || got.UID != c.want.UID || got.GID != c.want.GID || len(got.Groups) != 0 {
			t.Errorf("ParseUser(%q, %d) = %v, %v; want %v", c.in, c.offset, got, err, c.want)
		}
	}
}

func TestFlagsParse(t *testing.T) {
	f := Flags{User: "auto", Env: " AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY ,", Insecure: "false"}
	opts, names, err := f.Parse()
	if err != nil || opts.Insecure || strings.Join(names, ",") != "AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY" {
		t.Fatalf("Parse = %+v %v %v", opts, names, err)
	}
	for _, c := range []struct {
		f   Flags
		err string
	}{
		{Flags{User: "auto", Insecure: "maybe"}, "--insecure-no-template-isolation: want true or false"},
		{Flags{User: "auto", Insecure: "false", Env: "HANGAR_POSTGRES_URL"}, "--provisioner-env: HANGAR_POSTGRES_URL is Hangar's"},
		{Flags{User: "auto", Insecure: "false", Env: "TF_VAR_x"}, "--provisioner-env: TF_VAR_x is Hangar's"},
		{Flags{User: "auto", Insecure: "false", Env: "A=B"}, `--provisioner-env: "A=B" is not a variable name`},
		{Flags{User: "0", Insecure: "false"}, "--provisioner-user:"},
	} {
		if _, _, err := c.f.Parse(); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Parse(%+v) = %v, want %q", c.f, err, c.err)
		}
	}
}

func TestDecode(t *testing.T) {
	good := Spec{UID: 64000, GID: 64000, Terraform: "/usr/bin/terraform", Hide: []string{"/var/lib/hangar"}, Expose: []string{"/var/lib/hangar/provisioner/0/j"},
		Provider: "/usr/bin/hangar", ProviderAddress: "hangar.dev/hangar/hangar", ProviderVersion: "0.1.0"}
	v, err := good.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Decode(v); err != nil || got.UID != good.UID || got.Expose[0] != good.Expose[0] {
		t.Fatalf("Decode(Encode) = %+v, %v", got, err)
	}
	for _, bad := range []Spec{
		{UID: 0, GID: 1, Terraform: "/t"},
		{UID: 1, GID: 1, Terraform: "terraform"},
		{UID: 1, GID: 1, Terraform: "/t", Hide: []string{"/"}},
		{UID: 1, GID: 1, Terraform: "/t", Expose: []string{"/a/../b"}},
		{UID: 1, GID: 1, Terraform: "/t", Provider: "/h", ProviderAddress: "a/../b", ProviderVersion: "1"},
	} {
		v, _ := bad.Encode()
		if _, err := Decode(v); err == nil {
			t.Errorf("Decode accepted %+v", bad)
		}
	}
}

// FuzzDecode: no value of the environment variable makes Decode panic, and what it accepts is a
// spec of an unprivileged user with clean absolute paths.
func FuzzDecode(f *testing.F) {
	f.Add(`{"uid":64000,"gid":64000,"terraform":"/usr/bin/terraform","hide":["/d"],"expose":["/d/j"]}`)
	f.Add(`{"uid":0}`)
	f.Add(`nonsense`)
	f.Fuzz(func(t *testing.T, v string) {
		s, err := Decode(v)
		if err != nil {
			return
		}
		if s.UID <= 0 || s.GID <= 0 || !strings.HasPrefix(s.Terraform, "/") {
			t.Fatalf("accepted %+v", s)
		}
		for _, p := range append(s.Hide, s.Expose...) {
			if p == "/" || !strings.HasPrefix(p, "/") || strings.Contains(p, "/../") {
				t.Fatalf("accepted the path %q", p)
			}
		}
	})
}

// IsHelper: a workspace helper under any name, Hangar's agent, not another program's agent.
func TestProcessIsHelper(t *testing.T) {
	for args, want := range map[string]bool{
		"/usr/local/bin/hangar workspace-helper --connect-url http://h":                            true,
		"/tmp/.hangar/plugins/x/terraform-provider-hangar_v0.1.0 workspace-helper --connect-url u": true,
		"hangar agent --server http://h":                                                           true,
		"/usr/bin/vault agent -config x":                                                           false,
		"sleep 600":                                                                                false,
		"hangar":                                                                                   false,
	} {
		if got := (Process{Args: strings.Fields(args)}).IsHelper(); got != want {
			t.Errorf("%q: IsHelper %v, want %v", args, got, want)
		}
	}
}
