package workspace

import "testing"

func TestVisible(t *testing.T) {
	owner := User{ID: "u1"}
	other := User{ID: "u2"}
	admin := User{ID: "u3", Admin: true}
	w := Workspace{ID: "w1", OwnerID: "u1"}
	for _, tc := range []struct {
		name string
		u    User
		want bool
	}{
		{"the owner", owner, true},
		{"another user", other, false},
		{"an admin", admin, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Visible(tc.u, w); got != tc.want {
				t.Errorf("Visible(%s) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}
