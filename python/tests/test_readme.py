"""The README's Python quickstart runs as written (from the repository root, with this
venv's interpreter) and prints a JSON object that parses and has the schema's one key."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import shared_path

ROOT = Path(__file__).resolve().parents[2]


def quickstart() -> str:
    """The first ```python block after the README's "## Python:" heading."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## Python:"))
    begin = next(i for i in range(start, len(lines)) if lines[i].startswith("```python"))
    end = next(i for i in range(begin + 1, len(lines)) if lines[i].startswith("```"))
    return "\n".join(lines[begin + 1 : end])


def test_readme_python_quickstart_runs():
    shared_path("tokenizers", "qwen3", "tokenizer.json")
    code = quickstart()
    assert "import tokensieve as xgr" in code
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    text = run.stdout.strip().rsplit(" {", 1)[0]
    value = json.loads(text)
    assert list(value) == ["city"] and isinstance(value["city"], str)
    assert len(value["city"]) <= 20
