"""What the tests of scripts/ share: loading a script as a module, and named checks that print ok / FAIL and
are counted (the test's exit status is 1 when any failed)."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def script_path(name):
    return os.path.join(ROOT, "scripts", name)


def load_script(name):
    """scripts/NAME as a module (its main() does not run)."""
    spec = importlib.util.spec_from_file_location(os.path.splitext(name)[0], script_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
