package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// An imageSpec describes a single-layer image built from files of this machine: no registry, no
// Docker. writeDockerArchive writes it as a docker-archive tarball (manifest.json with RepoTags),
// which `ctr images import` loads.
type imageSpec struct {
	tag        string            // e.g. hangar.local/workspace:dev
	files      map[string]string // path in the image -> file on this machine (mode kept, made readable)
	symlinks   map[string]string // path in the image -> target
	dirs       map[string]int64  // extra directories -> mode (e.g. /tmp 01777)
	contents   map[string]string // path in the image -> literal content (mode 0644)
	user       string            // numeric uid[:gid]; empty means root
	entrypoint []string
	cmd        []string
	env        []string
	workdir    string
}

// A fixed time for every entry, so that the same inputs give the same image.
var epoch = time.Unix(0, 0).UTC()

func (s imageSpec) layer() ([]byte, error) {
	type entry struct {
		hdr  *tar.Header
		body []byte
	}
	var entries []entry
	dirs := map[string]int64{}
	add := func(p string, hdr *tar.Header, body []byte) {
		name := strings.TrimPrefix(p, "/")
		for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
		hdr.Name, hdr.ModTime = name, epoch
		entries = append(entries, entry{hdr, body})
	}
	for p, src := range s.files {
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.tag, err)
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		add(p, &tar.Header{Typeflag: tar.TypeReg, Mode: int64(st.Mode().Perm() | 0o444), Size: int64(len(b))}, b)
	}
	for p, text := range s.contents {
		add(p, &tar.Header{Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(text))}, []byte(text))
	}
	for p, target := range s.symlinks {
		add(p, &tar.Header{Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}, nil)
	}
	for d, m := range s.dirs {
		add(d+"/.", &tar.Header{}, nil) // records the parents
		entries = entries[:len(entries)-1]
		dirs[strings.TrimPrefix(d, "/")] = m
	}
	for d, m := range dirs {
		entries = append(entries, entry{&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: m, ModTime: epoch}, nil})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].hdr.Name < entries[j].hdr.Name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// writeDockerArchive writes the image to w as a docker-archive tarball.
func (s imageSpec) writeDockerArchive(w io.Writer) error {
	layer, err := s.layer()
	if err != nil {
		return err
	}
	diffID := "sha256:" + sha256Hex(layer)
	type config struct {
		User       string   `json:"User,omitempty"`
		Env        []string `json:"Env,omitempty"`
		Entrypoint []string `json:"Entrypoint,omitempty"`
		Cmd        []string `json:"Cmd,omitempty"`
		WorkingDir string   `json:"WorkingDir,omitempty"`
	}
	env := append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, s.env...)
	cfg, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       config{User: s.user, Env: env, Entrypoint: s.entrypoint, Cmd: s.cmd, WorkingDir: s.workdir},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history":      []map[string]string{{"created": epoch.Format(time.RFC3339), "created_by": "scripts/kube-up"}},
	})
	if err != nil {
		return err
	}
	cfgName := sha256Hex(cfg) + ".json"
	layerName := sha256Hex(layer) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{s.tag}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		body []byte
	}{{cfgName, cfg}, {layerName, layer}, {"manifest.json", manifest}} {
		if dir := path.Dir(f.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	return tw.Close()
}
