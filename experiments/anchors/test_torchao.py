#!/usr/bin/env python3
"""experiments/anchors/harness.py import_torchao, without torch: a torchao wheel in .deps/wheels/ is
installed offline (pip --no-index) into .deps/torchao/ on first use and imported from there; no
wheel, or a wheel that does not import, is a reason to skip, never a crash. The wheels here are
tiny fakes built on the spot; each case runs in its own interpreter (imports are cached).
And inductor_options_kept: the Inductor options a torchao row sets (as its quantize_ does) are
put back after the row, so a later row's compile sees Inductor's defaults (on a fake config).

  /usr/bin/python3 experiments/test_anchors_torchao.py
"""
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fake_wheel(folder, version="0.0.1", body='__version__ = "{v}"\n'):
    """A minimal valid wheel of a package named torchao."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torchao-{version}-py3-none-any.whl"
    info = f"torchao-{version}.dist-info"
    files = {"torchao/__init__.py": body.format(v=version),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torchao\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def import_in(repo):
    """(module version or None, why) from import_torchao(repo), in a fresh interpreter."""
    code = textwrap.dedent(f"""\
        from experiments.anchors import harness
        m, why = harness.import_torchao({str(repo)!r})
        print(m.__version__ if m else "None"); print(why)""")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = out.stdout.splitlines()
    return (None if lines[0] == "None" else lines[0]), (lines[1] if len(lines) > 1 else "")


@unittest.skipIf(subprocess.run([sys.executable, "-c", "import torchao"], capture_output=True).returncode == 0,
                 "this interpreter has torchao installed: import_torchao takes it, not a wheel")
class ImportTorchao(unittest.TestCase):
    def test_no_wheel_is_a_reason(self):
        with tempfile.TemporaryDirectory() as d:
            version, why = import_in(d)
            self.assertIsNone(version)
            self.assertIn("no torchao wheel", why)

    def test_wheel_installed_offline_once_and_imported(self):
        with tempfile.TemporaryDirectory() as d:
            fake_wheel(Path(d) / ".deps" / "wheels", "0.0.1")
            self.assertEqual(import_in(d), ("0.0.1", ""))
            self.assertTrue((Path(d) / ".deps" / "torchao" / "torchao-0.0.1-py3-none-any" / "torchao").is_dir())
            self.assertEqual(import_in(d), ("0.0.1", ""))  # again, from the installed copy

    def test_a_wheel_that_does_not_import_is_a_reason(self):
        with tempfile.TemporaryDirectory() as d:
            fake_wheel(Path(d) / ".deps" / "wheels", "0.0.2", body='raise RuntimeError("built for another torch")\n')
            version, why = import_in(d)
            self.assertIsNone(version)
            self.assertIn("does not import", why)
            self.assertIn("another torch", why)


class FakeInductorConfig:
    """The two methods of torch._inductor.config that inductor_options_kept uses."""
    def __init__(self):
        self.coordinate_descent_tuning = False
        self.fx_graph_cache = True

    def get_config_copy(self):
        return dict(vars(self))

    def load_config(self, config):
        for name, value in config.items():
            setattr(self, name, value)


class InductorOptionsKept(unittest.TestCase):
    def setUp(self):
        from experiments.anchors import harness
        self.kept = harness.inductor_options_kept
        self.torch = type("FakeTorch", (), {})()
        self.torch._inductor = type("FakeInductor", (), {})()
        self.torch._inductor.config = FakeInductorConfig()

    def test_options_a_row_sets_are_put_back(self):
        config = self.torch._inductor.config
        with self.kept(self.torch):
            config.coordinate_descent_tuning = True   # what torchao's quantize_ sets
            self.assertTrue(config.coordinate_descent_tuning)  # for the row's own compile
        self.assertFalse(config.coordinate_descent_tuning)
        self.assertTrue(config.fx_graph_cache)

    def test_put_back_when_the_row_fails(self):
        config = self.torch._inductor.config
        with self.assertRaises(RuntimeError):
            with self.kept(self.torch):
                config.coordinate_descent_tuning = True
                raise RuntimeError("the compile failed")
        self.assertFalse(config.coordinate_descent_tuning)


if __name__ == "__main__":
    unittest.main()
