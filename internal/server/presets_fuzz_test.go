package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// FuzzPresetBody sends arbitrary bodies to PUT /api/v1/templates/{name}/presets/{preset}: the
// server never fails with a 5xx, answers a JSON object, and a preset it accepts is listed as it
// was given (within the bounds of prebuild.Check).
func FuzzPresetBody(f *testing.F) {
	f.Add([]byte(`{"instances":2,"parameters":{"flavor":"s"}}`))
	f.Add([]byte(`{"instances":3,"schedule":[{"cron":"* 8-18 * * 1-5","instances":5}],"timezone":"Europe/Paris"}`))
	f.Add([]byte(`{"instances":1,"version":1}`))
	f.Add([]byte(`{"instances":1,"version":9}`))
	f.Add([]byte(`{"instances":-1,"schedule":[{"cron":"0 0 31 2 *","instances":1}]}`))
	f.Add([]byte(`{"instances":1,"timezone":"Mars/Olympus","schedule":[{"cron":"* * * * *","instances":1}]}`))
	f.Add([]byte(`{"instances":1,"parameters":{"workspace_name":"x","nope":"\u0000"}}`))
	f.Add([]byte(`{"instances":1e3}`))
	f.Add([]byte(`[]`))
	env := servertest.New(f)
	admin, err := sdk.New(env.URL, env.AdminToken)
	if err != nil {
		f.Fatal(err)
	}
	archive := tfArchive(f, map[string]string{"main.tf": "variable \"flavor\" {\n  type = string\n}\n"})
	if _, err := admin.PushTemplateVersion(f.Context(), "tf", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := http.NewRequest(http.MethodPut, env.URL+"/api/v1/templates/tf/presets/p", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+env.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var answer map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
			t.Fatalf("status %d: not a JSON object: %v", resp.StatusCode, err)
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("status %d for %q: %v", resp.StatusCode, body, answer)
		}
		if resp.StatusCode != http.StatusOK {
			return
		}
		var sent sdk.PutPresetRequest
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("accepted a body that does not decode: %q", body)
		}
		ps, err := admin.ListPresets(t.Context(), "tf")
		if err != nil || len(ps) != 1 {
			t.Fatalf("presets %+v, %v", ps, err)
		}
		p := ps[0]
		if p.Instances != sent.Instances || p.Instances < 0 || p.Instances > 100 || p.Version != sent.Version || len(p.Schedule) != len(sent.Schedule) ||
			p.Timezone != sent.Timezone || len(p.Parameters) != len(sent.Parameters) {
			t.Fatalf("accepted %q, listed %+v", body, p)
		}
		for k, v := range sent.Parameters {
			if p.Parameters[k] != v {
				t.Fatalf("parameter %s: sent %q, listed %q", k, v, p.Parameters[k])
			}
		}
	})
}
