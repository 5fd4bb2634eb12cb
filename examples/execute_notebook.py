"""Run a notebook headless with a real Jupyter kernel (nbclient); a failing cell fails the run.

    python examples/execute_notebook.py examples/quickstart.ipynb \\
        [--executed out.ipynb] [--text out.txt] [--timeout 600]

``--executed`` keeps the executed copy (outputs included), ``--text`` the cells' printed outputs
as plain text (what a results folder records). The notebook in the repository stays stripped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def execute(path: str | Path, timeout: int = 600, cwd: str | Path | None = None):
    """The notebook at ``path`` after running every cell in a fresh ``python3`` kernel."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(str(path), as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd or Path(path).parent)}})
    client.execute()
    return notebook


def as_text(notebook) -> str:
    """Each code cell's source and its text outputs (stream text, plain-text results)."""
    parts = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        parts.append(f"# --- cell {index} ---\n{cell.source}\n# --- output ---")
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                parts.append(output.text.rstrip())
            elif "data" in output:
                data = output["data"]
                parts.append("[image/png]" if "image/png" in data else data.get("text/plain", "").rstrip())
            elif output.output_type == "error":
                parts.append(f"{output.ename}: {output.evalue}")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook")
    parser.add_argument("--executed", help="write the executed notebook here")
    parser.add_argument("--text", help="write the cells' text outputs here")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may run (default 600)")
    args = parser.parse_args(argv)
    from nbclient.exceptions import CellExecutionError

    try:
        notebook = execute(args.notebook, args.timeout)
    except CellExecutionError as exc:
        print(f"{args.notebook}: a cell failed:\n{exc}", file=sys.stderr)
        return 1
    if args.executed:
        import nbformat

        nbformat.write(notebook, args.executed)
    text = as_text(notebook)
    if args.text:
        Path(args.text).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
