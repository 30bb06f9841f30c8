"""tools/check_cycles.py (``make check-cycles``) on small synthetic trees: it finds a cycle, passes a
tree without one, and leaves test code out, so the check cannot pass by seeing nothing."""

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_cycles.py"


@pytest.fixture(scope="module")
def cc():
    spec = importlib.util.spec_from_file_location("check_cycles", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_cycles"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def tree(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip())
    return root


def crate(name: str, files: dict) -> dict:
    out = {f"crates/{name}/Cargo.toml": f'[package]\nname = "{name}"\n'}
    out.update({f"crates/{name}/src/{k}": v for k, v in files.items()})
    return out


def run(cc, root: Path, capsys, *args: str):
    code = cc.main(["--root", str(root), *args])
    return code, capsys.readouterr().out


def test_a_cycle_through_a_crate_root_re_export_is_found_with_its_lines(cc, tmp_path, capsys):
    root = tree(tmp_path, crate("a", {
        "lib.rs": """
            pub mod x;
            pub mod y;
            pub use x::Thing;
            """,
        "x.rs": """
            use crate::y::helper;
            pub struct Thing;
            pub fn f() { helper() }
            """,
        # `crate::Thing` is lib.rs's re-export: the edge goes to x.rs, which defines it.
        "y.rs": """
            // use crate::x::Thing;  (a comment is no import)
            pub fn helper() {}
            pub fn g() -> crate::Thing { crate::Thing }
            """,
    }))
    code, out = run(cc, root, capsys)
    assert code == 1
    assert "a: import cycle between 2 files" in out
    assert "crates/a/src/x.rs:1 imports crates/a/src/y.rs" in out
    assert "crates/a/src/y.rs:3 imports crates/a/src/x.rs" in out


def test_a_dag_passes_and_test_code_is_left_out(cc, tmp_path, capsys):
    root = tree(tmp_path, crate("a", {
        "lib.rs": """
            pub mod low;
            pub mod high;
            #[cfg(test)]
            mod tests;
            """,
        "low.rs": """
            pub fn base() {}

            #[cfg(test)]
            fn only_in_tests() { crate::high::top() }

            #[cfg(test)]
            mod tests {
                use crate::high::top;
                #[test]
                fn t() { top() }
            }
            """,
        "high.rs": """
            use super::{low::{self, base}};
            pub fn top() { base(); low::base() }
            """,
        # A file declared only under #[cfg(test)]: not part of the crate's graph.
        "tests.rs": """
            use crate::high::top;
            use crate::low::base;
            """,
    }))
    code, out = run(cc, root, capsys)
    assert code == 0, out
    assert "a: no import cycle" in out


def test_a_parent_and_child_module_calling_each_other_are_a_cycle(cc, tmp_path, capsys):
    root = tree(tmp_path, crate("a", {
        "lib.rs": "pub mod store;\n",
        "store/mod.rs": """
            mod local;
            pub struct Meta;
            pub fn open() { local::map() }
            """,
        "store/local.rs": """
            use super::Meta;
            pub(super) fn map() { let _m = Meta; }
            """,
    }))
    code, out = run(cc, root, capsys)
    assert code == 1
    assert "crates/a/src/store/local.rs:1 imports crates/a/src/store/mod.rs" in out
    assert "crates/a/src/store/mod.rs:3 imports crates/a/src/store/local.rs" in out


def test_a_re_export_in_a_parent_is_no_dependency_of_the_parent(cc, tmp_path, capsys):
    root = tree(tmp_path, crate("a", {
        "lib.rs": "pub mod store;\n",
        "store/mod.rs": """
            mod meta;
            mod local;
            pub use self::meta::Meta;
            pub fn open() { local::map() }
            """,
        "store/meta.rs": "pub struct Meta;\n",
        "store/local.rs": """
            use super::Meta;
            pub(super) fn map() { let _m = Meta; }
            """,
    }))
    code, out = run(cc, root, capsys)
    assert code == 0, out


def python_package(files: dict) -> dict:
    return {f"python/stokehold/{k}": v for k, v in files.items()}


def test_python_a_cycle_held_by_an_import_inside_a_function_is_found(cc, tmp_path, capsys):
    root = tree(tmp_path, python_package({
        "__init__.py": "from .dataset import Dataset\n",
        "dataset.py": """
            class Dataset:
                def decode(self):
                    from .audio import decode
                    return decode(self)
            """,
        "audio.py": """
            from .dataset import Dataset
            def decode(ds): return Dataset()
            """,
    }))
    code, out = run(cc, root, capsys)
    assert code == 1
    assert "python/stokehold/dataset.py:3 imports python/stokehold/audio.py" in out
    assert "python/stokehold/audio.py:1 imports python/stokehold/dataset.py" in out


def test_python_type_checking_imports_and_names_from_init_resolve_as_python_does(cc, tmp_path, capsys):
    root = tree(tmp_path, python_package({
        "__init__.py": "from . import audio, dataset\nVERSION = 1\n",
        "dataset.py": "from . import audio\n",
        "audio.py": """
            from typing import TYPE_CHECKING
            from . import _native
            if TYPE_CHECKING:
                from .dataset import Dataset
            """,
        "_native.pyi": "def f() -> None: ...\n",
    }))
    code, out = run(cc, root, capsys)
    assert code == 0, out
    # `from . import VERSION` names __init__, which imports the module back: a cycle.
    (root / "python/stokehold/audio.py").write_text("from . import VERSION\n")
    code, out = run(cc, root, capsys)
    assert code == 1
    assert "python/stokehold/audio.py:1 imports python/stokehold/__init__.py" in out
    # An import by name through importlib is an import too.
    (root / "python/stokehold/audio.py").write_text("import importlib\n\n\ndef f():\n"
                                                    "    return importlib.import_module('stokehold.dataset')\n")
    code, out = run(cc, root, capsys)
    assert code == 1
    assert "python/stokehold/audio.py:5 imports python/stokehold/dataset.py" in out


def test_pending_crates_print_their_cycles_without_failing(cc, tmp_path, capsys):
    root = tree(tmp_path, crate("a", {
        "lib.rs": "mod x;\nmod y;\n",
        "x.rs": "use crate::y::Y;\npub struct X;\n",
        "y.rs": "use crate::x::X;\npub struct Y;\n",
    }))
    code, out = run(cc, root, capsys, "--pending", "a")
    assert code == 0
    assert "a (pending: reported, not failed): import cycle between 2 files" in out
    code, _ = run(cc, root, capsys, "--pending", "not-a-crate")
    assert code == 2
