package runtime

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ArchiveLogs writes the job log directory logDir (/var/vcap/sys/log) as a
// gzipped tarball to w, as the agent's fetch_logs packs it: entries
// relative to logDir ("./<job>/<file>"), regular files and directories
// only. With jobs, only those jobs' directories are packed.
func ArchiveLogs(w io.Writer, logDir string, jobs []string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(logDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(logDir, path)
		if rel == "." {
			return nil
		}
		if len(jobs) > 0 && !slices.Contains(jobs, firstElem(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = "./" + filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		// A log grows while it is read: pack the size the header says.
		_, err = io.CopyN(tw, f, hdr.Size)
		return err
	})
	if err != nil {
		return fmt.Errorf("packing %s: %w", logDir, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// firstElem is the job directory a path relative to the log directory is in.
func firstElem(rel string) string {
	job, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return job
}

// Shell runs command with sh -c, or an interactive login shell when it is
// empty, as vcap (root when asked), with the agent's PATH: what `bosh ssh`
// gives, whose user has sudo. Its exit code is returned.
func Shell(ctx context.Context, root bool, command string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	args := []string{"-l"}
	if command != "" {
		args = []string{"-c", command}
	}
	shell := "/bin/bash"
	if _, err := os.Stat(shell); err != nil {
		shell = "/bin/sh"
	}
	cmd := exec.CommandContext(ctx, shell, args...)
	homes, user := []string{"/home/vcap", "/var/vcap"}, "vcap"
	if root {
		homes, user = []string{"/root"}, "root"
	} else {
		attr, err := credentials(nil)
		if err != nil {
			return 1, err
		}
		cmd.SysProcAttr = attr
	}
	home := "/"
	for _, h := range homes {
		if _, err := os.Stat(h); err == nil {
			home = h
			break
		}
	}
	cmd.Env = append(os.Environ(), "PATH="+agentPath+":/var/vcap/bosh/bin", "HOME="+home, "USER="+user, "LOGNAME="+user)
	cmd.Dir = home
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		return 1, fmt.Errorf("starting %s as %s: %w", shell, user, err)
	}
	return exitCode(cmd, err), nil
}
