package server

import (
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/protocol"
)

// FuzzCheckDotfilesStatus: whatever a helper sends, a report that is accepted has a known state, a
// repository, and text within its bounds; nothing panics.
func FuzzCheckDotfilesStatus(f *testing.F) {
	f.Add(`{"state":"installed","repository":"https://x/y.git","script":"install.sh"}`)
	f.Add(`{"state":"failed","repository":"r","error":"e","log":"a\nb\n"}`)
	f.Add(`{"state":"done"}`)
	f.Add(`{"state":"installing","repository":"\u0000\ud800"}`)
	f.Fuzz(func(t *testing.T, body string) {
		var st protocol.DotfilesStatus
		if json.Unmarshal([]byte(body), &st) != nil {
			return
		}
		if checkDotfilesStatus(st) != nil {
			return
		}
		if !slices.Contains([]string{"installing", "installed", "failed"}, st.State) || st.Repository == "" ||
			len(st.Log) > protocol.MaxDotfilesLogBytes || len(st.Script) > 256 || len(st.Error) > 4096 || len(st.Repository) > 2048 ||
			!utf8.ValidString(st.Log+st.Error+st.Script+st.Repository) {
			t.Fatalf("accepted %+v", st)
		}
	})
}
