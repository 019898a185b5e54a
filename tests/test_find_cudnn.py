"""The choice of cuDNN (common/cudnn/find_cudnn.py): PyTorch's wheel cuDNN beside torch in a
Python's site-packages first, else the newest system cuDNN by its cudnn_version.h; exercised on
fake site-packages and system folders, with a fake Python that finds the fake torch."""
import os
import stat
import subprocess
import sys
import tempfile
import unittest

import importlib.util

# common/cudnn/find_cudnn.py is a script of the C++ build (./study runs it), not a package module.
_spec = importlib.util.spec_from_file_location(
    "find_cudnn", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common", "cudnn", "find_cudnn.py"))
find_cudnn = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(find_cudnn)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common", "cudnn", "find_cudnn.py")


def write(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def fake_cudnn(root, version, inc="include", lib="lib", lib_name="libcudnn.so.9"):
    major, minor, patch = version
    write(os.path.join(root, inc, "cudnn.h"), "#include <cudnn_version.h>\n")
    write(os.path.join(root, inc, "cudnn_version.h"),
          "#define CUDNN_MAJOR %d\n#define CUDNN_MINOR %d\n#define CUDNN_PATCHLEVEL %d\n"
          "#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n"
          % (major, minor, patch))
    write(os.path.join(root, lib, lib_name))
    return root


def fake_python(tmp, site):
    """An interpreter whose site-packages is `site` (first on its path)."""
    path = os.path.join(tmp, "python-with-%s" % os.path.basename(site))
    write(path, '#!/bin/sh\nPYTHONPATH="%s" exec "%s" "$@"\n' % (site, sys.executable))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


class FindCudnn(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name
        # System cuDNNs: 9.9 beside the toolkit, 9.14 in the Debian multiarch folders.
        self.cuda = fake_cudnn(os.path.join(self.tmp, "cuda"), (9, 9, 0), lib="lib64")
        self.usr = fake_cudnn(os.path.join(self.tmp, "usr"), (9, 14, 0),
                              inc="include/x86_64-linux-gnu", lib="lib/x86_64-linux-gnu")
        self.systems = [self.cuda, self.usr]
        # A venv with torch and the nvidia-cudnn wheel (versioned library names only).
        self.site = os.path.join(self.tmp, "site-packages")
        write(os.path.join(self.site, "torch", "__init__.py"))
        self.wheel = fake_cudnn(os.path.join(self.site, "nvidia", "cudnn"), (9, 19, 0))
        self.torch_py = fake_python(self.tmp, self.site)
        # A Python without torch.
        self.plain_py = fake_python(self.tmp, os.path.join(self.tmp, "empty"))

    def tearDown(self):
        self._tmp.cleanup()

    def test_layout_reads_every_kind_of_root(self):
        self.assertEqual(find_cudnn.layout(self.wheel),
                         (os.path.join(self.wheel, "include"), os.path.join(self.wheel, "lib", "libcudnn.so.9")))
        self.assertEqual(find_cudnn.layout(self.cuda)[1], os.path.join(self.cuda, "lib64", "libcudnn.so.9"))
        self.assertEqual(find_cudnn.layout(self.usr)[0], os.path.join(self.usr, "include", "x86_64-linux-gnu"))
        self.assertIsNone(find_cudnn.layout(os.path.join(self.tmp, "nothing")))
        self.assertEqual(find_cudnn.header_version(os.path.join(self.wheel, "include")), (9, 19, 0))

    def test_pytorch_cudnn_comes_first(self):
        root, why = find_cudnn.choose([self.plain_py, self.torch_py], self.systems)
        self.assertEqual(root, self.wheel)
        self.assertIn("9.19.0", why)
        self.assertIn("PyTorch of " + self.torch_py, why)

    def test_newest_system_cudnn_without_pytorch(self):
        root, why = find_cudnn.choose([self.plain_py], self.systems)
        self.assertEqual(root, self.usr)  # 9.14 is newer than 9.9: compared as numbers
        self.assertIn("9.14.0, the newest system cuDNN", why)
        self.assertIn("9.9.0 at " + self.cuda, why)
        # Equal versions: the first candidate.
        twin = fake_cudnn(os.path.join(self.tmp, "twin"), (9, 14, 0))
        self.assertEqual(find_cudnn.choose([], [twin, self.usr])[0], twin)
        self.assertEqual(find_cudnn.choose([], [self.cuda, self.usr, self.cuda])[0], self.usr)

    def test_pytorch_without_a_whole_wheel_cudnn(self):
        os.remove(os.path.join(self.wheel, "lib", "libcudnn.so.9"))
        self.assertEqual(find_cudnn.choose([self.torch_py], self.systems)[0], self.usr)
        write(os.path.join(self.wheel, "lib", "libcudnn.so"))  # an unversioned name also serves
        self.assertEqual(find_cudnn.choose([self.torch_py], self.systems)[0], self.wheel)
        os.remove(os.path.join(self.wheel, "include", "cudnn_version.h"))
        self.assertEqual(find_cudnn.choose([self.torch_py], self.systems)[0], self.usr)

    def test_missing_python_and_no_cudnn(self):
        root, why = find_cudnn.choose([os.path.join(self.tmp, "no-such-python"), ""],
                                      [os.path.join(self.tmp, "none")])
        self.assertEqual(root, "")
        self.assertIn("no cuDNN found", why)

    def test_command_line_prints_root_then_reason(self):
        args = [sys.executable, SCRIPT, "--python", self.torch_py]
        for s in self.systems:
            args += ["--system", s]
        lines = subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()
        self.assertEqual(lines[0], self.wheel)
        self.assertIn("9.19.0", lines[1])
        bad = subprocess.run([sys.executable, SCRIPT, "--bogus"], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)


if __name__ == "__main__":
    unittest.main()
