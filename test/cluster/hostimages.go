package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SharedLibraries lists the shared libraries a program of this machine loads (ldd), the
// dynamic loader included: what an image of that program (ImportHostFilesImage) needs
// beside it.
func SharedLibraries(program string) ([]string, error) {
	out, err := exec.Command("ldd", program).Output()
	if err != nil {
		return nil, fmt.Errorf("listing the libraries of %s: %w", program, err)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 3 && fields[1] == "=>" && strings.HasPrefix(fields[2], "/"):
			libs = append(libs, fields[2])
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
			libs = append(libs, fields[0]) // the loader: /lib64/ld-linux-x86-64.so.2 (0x…)
		}
	}
	return libs, nil
}

// TorchImageFiles lists, for ImportHostFilesImage, the files of an image that runs this
// machine's python3 with Debian's python3-torch: the interpreter (as python3 and python), its
// standard library, torch and the packages it imports, and the libraries they load. extra
// adds files: a path in the image to a path here (a training script, say).
func TorchImageFiles(extra map[string]string) (map[string]string, error) {
	python, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		return nil, fmt.Errorf("the torch image needs this machine's python3: %w", err)
	}
	stdlib := "/usr/lib/" + filepath.Base(python)
	const dist = "/usr/lib/python3/dist-packages"
	files := map[string]string{"/usr/bin/python3": python, "/usr/bin/python": python, stdlib: stdlib}
	for image, host := range extra {
		files[image] = host
	}
	programs := []string{python}
	for _, pkg := range []string{"torch", "numpy", "astunparse", "certifi", "six.py", "typing_extensions.py", "_distutils_hack"} {
		p := filepath.Join(dist, pkg)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("the torch image needs %s (apt-get install python3-torch): %w", p, err)
		}
		files[p] = p
		_ = filepath.WalkDir(p, func(f string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(f, ".so") {
				programs = append(programs, f)
			}
			return nil
		})
	}
	for i, p := range programs {
		libs, err := SharedLibraries(p)
		if err != nil && i == 0 {
			return nil, err
		}
		if err != nil {
			continue // a plugin library torch does not load here (ldd cannot resolve it)
		}
		for _, lib := range libs {
			files[lib] = lib
		}
	}
	return files, nil
}
