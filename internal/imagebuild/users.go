package imagebuild

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// maxAccountsFile bounds /etc/passwd and /etc/group as read from the image.
const maxAccountsFile = 8 << 20

// account is one /etc/passwd line (a group is one /etc/group line: Name and UID hold its name and
// GID).
type account struct {
	Name     string
	UID, GID int
	Home     string
	Members  []string // a group's
}

// parseAccounts reads /etc/passwd (name:x:uid:gid:gecos:home:shell) or, with group, /etc/group
// (name:x:gid:members). Lines it cannot read (comments, NIS "+" lines, short lines) are skipped,
// as the C library does.
func parseAccounts(r io.Reader, group bool) ([]account, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxAccountsFile))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var out []account
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 3 || f[0] == "" || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], "+") || strings.HasPrefix(f[0], "-") {
			continue
		}
		id, err := strconv.Atoi(f[2])
		if err != nil || id < 0 {
			continue
		}
		a := account{Name: f[0], UID: id}
		if group && len(f) >= 4 && f[3] != "" {
			a.Members = strings.Split(f[3], ",")
		}
		if !group {
			if len(f) < 6 {
				continue
			}
			if a.GID, err = strconv.Atoi(f[3]); err != nil || a.GID < 0 {
				continue
			}
			a.Home = f[5]
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// accounts reads the image's /etc/passwd or /etc/group under root (none: no accounts).
func accounts(root string, group bool) ([]account, error) {
	name := "/etc/passwd"
	if group {
		name = "/etc/group"
	}
	f, err := os.Open(filepath.Join(root, name))
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read the image's %s: %w", name, err)
	}
	defer f.Close()
	a, err := parseAccounts(f, group)
	if err != nil {
		return nil, fmt.Errorf("read the image's %s: %w", name, err)
	}
	return a, nil
}

// identity is a resolved USER: whom a RUN runs as.
type identity struct {
	UID, GID int
	Name     string // empty when the image has no such account
	Home     string
	Groups   []int // supplementary: the groups of /etc/group that list Name, as Docker gives them
}

// resolveUser resolves a Dockerfile USER value ("name", "uid", "name:group", "uid:gid"; empty is
// root) against the image's accounts, as Docker does: a name must exist, a number need not.
func resolveUser(root, user string) (identity, error) {
	if user == "" {
		user = "root"
	}
	u, g, hasGroup := strings.Cut(user, ":")
	passwd, err := accounts(root, false)
	if err != nil {
		return identity{}, err
	}
	var id identity
	if n, err := strconv.Atoi(u); err == nil && n >= 0 {
		id = identity{UID: n, GID: n, Home: "/"}
		for _, a := range passwd {
			if a.UID == n {
				id = identity{UID: n, GID: a.GID, Name: a.Name, Home: a.Home}
				break
			}
		}
		if n == 0 && id.Name == "" {
			id.Name, id.Home = "root", "/root"
		}
	} else {
		found := false
		for _, a := range passwd {
			if a.Name == u {
				id, found = identity{UID: a.UID, GID: a.GID, Name: a.Name, Home: a.Home}, true
				break
			}
		}
		if !found {
			if u != "root" {
				return identity{}, fmt.Errorf("user %q is not in the image's /etc/passwd", u)
			}
			id = identity{Name: "root", Home: "/root"}
		}
	}
	if hasGroup {
		gid, err := resolveGroup(root, g)
		if err != nil {
			return identity{}, err
		}
		id.GID = gid
	} else if id.Name != "" {
		groups, err := accounts(root, true)
		if err != nil {
			return identity{}, err
		}
		for _, gr := range groups {
			if gr.UID != id.GID && slices.Contains(gr.Members, id.Name) {
				id.Groups = append(id.Groups, gr.UID)
			}
		}
	}
	return id, nil
}

// resolveGroup resolves a group name or number against the image's /etc/group.
func resolveGroup(root, g string) (int, error) {
	if n, err := strconv.Atoi(g); err == nil && n >= 0 {
		return n, nil
	}
	groups, err := accounts(root, true)
	if err != nil {
		return 0, err
	}
	for _, a := range groups {
		if a.Name == g {
			return a.UID, nil
		}
	}
	if g == "root" {
		return 0, nil
	}
	return 0, fmt.Errorf("group %q is not in the image's /etc/group", g)
}
