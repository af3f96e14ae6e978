package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseMetadataSpec(t *testing.T) {
	spec, err := ParseMetadataSpec(`{"items":[{"key":"load","script":"cat /proc/loadavg"}],"resources_monitoring":{"memory":80,"volumes":[{"path":"/projects","threshold":95}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if it := spec.Items[0]; it.DisplayName != "load" || it.Interval != 10 || it.Timeout != 5 || spec.Monitoring.MemoryThreshold() != 80 {
		t.Fatalf("defaults: %+v", spec)
	}
	if empty, err := ParseMetadataSpec(""); err != nil || empty.Monitoring.MemoryThreshold() != DefaultThresholdPercent {
		t.Fatalf("the empty spec: %+v, %v", empty, err)
	}
	for in, field := range map[string]string{
		`{"items":[{"key":"A b","script":"x"}]}`:                                                          "items[0].key:",
		`{"items":[{"key":"a","script":"x"},{"key":"a","script":"y"}]}`:                                   "items[1].key:",
		`{"items":[{"key":"a","script":"  "}]}`:                                                           "items[0].script:",
		`{"items":[{"key":"a","script":"x","interval":2,"timeout":3}]}`:                                   "items[0].timeout:",
		`{"items":[{"key":"a","script":"x","interval":100000}]}`:                                          "items[0].interval:",
		`{"items":[{"key":"a","script":"x","display_name":"two\nlines"}]}`:                                "items[0].display_name:",
		`{"resources_monitoring":{"memory":101}}`:                                                         "resources_monitoring.memory:",
		`{"resources_monitoring":{"volumes":[{"path":"home","threshold":90}]}}`:                           "resources_monitoring.volumes[0].path:",
		`{"resources_monitoring":{"volumes":[{"path":"/home","threshold":-1}]}}`:                          "resources_monitoring.volumes[0].threshold:",
		`{"items":[{"key":"a","script":"x","interval":18446744084}]}`:                                     "items[0].interval:",
		`{"items":[{"key":"a","script":"x","interval":9223372046}]}`:                                      "items[0].interval:",
		`{"resources_monitoring":{"volumes":[{"path":"/a","threshold":1},{"path":"/a/","threshold":2}]}}`: "resources_monitoring.volumes[1].path:",
		`{"itemz":[]}`: "unknown field",
		`{} {}`:        "more than one JSON value",
	} {
		if _, err := ParseMetadataSpec(in); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", in, err, field)
		}
	}
}

// A specification that travels in one environment variable is bounded as a whole, and its JSON
// does not escape < > & (a script full of them would be six times its size).
func TestMetadataSpecSize(t *testing.T) {
	spec := MetadataSpec{Items: []MetadataItemSpec{{Key: "a", Script: "echo a > b && cat < b"}}}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := EncodeMetadataSpec(spec); !strings.Contains(got, `"script":"echo a > b && cat < b"`) {
		t.Fatalf("encoded %s", got)
	}
	big := MetadataSpec{}
	for i := range MaxMetadataItems {
		big.Items = append(big.Items, MetadataItemSpec{Key: fmt.Sprintf("k%d", i), Script: "echo " + strings.Repeat(">", MaxMetadataScriptBytes-5)})
	}
	if err := big.Validate(); err == nil || !strings.HasPrefix(err.Error(), "items: the commands take ") {
		t.Fatalf("16 scripts of 4 KiB: %v", err)
	}
}

// FuzzParseMetadataSpec: whatever the input (an environment variable a template author writes),
// the parse never panics, and a spec it accepts is within its bounds and parses again the same.
func FuzzParseMetadataSpec(f *testing.F) {
	f.Add(`{"items":[{"key":"load","display_name":"Load","script":"cat /proc/loadavg","interval":5,"timeout":2}],"resources_monitoring":{"memory":80,"volumes":[{"path":"/projects","threshold":95}]}}`)
	f.Add(`{"resources_monitoring":{"memory":0}}`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, in string) {
		spec, err := ParseMetadataSpec(in)
		if err != nil {
			return
		}
		if len(spec.Items) > MaxMetadataItems || len(spec.Monitoring.Volumes) > MaxMonitoredVolumes {
			t.Fatalf("over the bounds: %+v", spec)
		}
		for _, it := range spec.Items {
			if it.Interval < 1 || it.Timeout < 1 || it.Timeout > it.Interval || !utf8.ValidString(it.Script) {
				t.Fatalf("an item out of its bounds: %+v", it)
			}
		}
		b, _ := json.Marshal(spec)
		again, err := ParseMetadataSpec(string(b))
		if err != nil {
			t.Fatalf("the accepted spec does not parse again: %v\n%s", err, b)
		}
		if b2, _ := json.Marshal(again); string(b2) != string(b) {
			t.Fatalf("parsed again differently:\n%s\n%s", b, b2)
		}
	})
}

// FuzzMetadataReport: a report the server accepts (decoded, then Check) has values within their
// bound, valid UTF-8, and bounded lists.
func FuzzMetadataReport(f *testing.F) {
	f.Add(`{"resources":{"cpu":{"used_cores":0.5},"memory":{"used_bytes":10,"limit_bytes":20,"threshold":90,"oom_kills":1},"volumes":[{"path":"/p","used_bytes":1,"total_bytes":2}]},"items":[{"key":"a","display_name":"A","value":"x"}]}`)
	f.Add(`{"items":[{"key":"a","value":"` + strings.Repeat("\\u00e9", 600) + `"}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		var r MetadataReport
		if json.Unmarshal([]byte(in), &r) != nil || r.Check() != nil {
			return
		}
		if len(r.Items) > MaxMetadataItems || len(r.Resources.Volumes) > MaxMonitoredVolumes {
			t.Fatalf("over the bounds: %d items, %d volumes", len(r.Items), len(r.Resources.Volumes))
		}
		for _, it := range r.Items {
			if len(it.Value) > MaxMetadataValueBytes || len(it.Error) > MaxMetadataValueBytes || !utf8.ValidString(it.Value) || !utf8.ValidString(it.Error) {
				t.Fatalf("a value over its bound or not UTF-8: %d bytes", len(it.Value))
			}
		}
	})
}
